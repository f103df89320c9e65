"""Decode an SWO capture with pyOCD's SWOParser and print its events one per line, in the form
`cargo sample swo --events` prints them, for the cross-check in tests/host/itm.rs.

Usage: python pyocd_swo.py CAPTURE
"""
import sys

from pyocd.trace import events
from pyocd.trace.swo import SWOParser


class Core:
    """The parser asks the core for exception names; the check compares numbers only."""

    def exception_number_to_name(self, number):
        return str(number)


class Lines:
    def __init__(self):
        self.lines = []

    def receive(self, e):
        if isinstance(e, events.TracePeriodicPC):
            self.lines.append("sleep" if e.pc == 0 else "pc 0x%08x" % e.pc)
        elif isinstance(e, events.TraceITMEvent):
            self.lines.append("itm %d 0x%x %d" % (e.port, e.data, e.width))
        elif isinstance(e, events.TraceEventCounter):
            self.lines.append("counter 0x%02x" % e.counter_mask)
        elif isinstance(e, events.TraceExceptionEvent):
            self.lines.append("exception %d %d" % (e.exception_number, e.action))
        elif isinstance(e, events.TraceOverflow):
            self.lines.append("overflow")
        elif isinstance(e, events.TraceTimestamp):
            self.lines.append("timestamp %d %d" % (e.tc, e.timestamp))
        else:
            self.lines.append("other " + type(e).__name__)


def main():
    data = open(sys.argv[1], "rb").read()
    sink = Lines()
    parser = SWOParser(Core(), sink)
    parser.parse(data)
    parser._flush_events()
    sys.stdout.write("".join(line + "\n" for line in sink.lines))


if __name__ == "__main__":
    main()

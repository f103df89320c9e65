#!/usr/bin/env python3
"""An independent reading of an ELF's DWARF, for checking cargo-sample's symbolizer.

Usage: dwarf_oracle.py FIRMWARE.elf < addresses (one hex address a line)
Prints one JSON object a line: {"addr", "symbol", "frames": [{"name", "file", "line"}...]},
frames innermost first, names as DWARF spells them (linkage names are left mangled).

It is written against pyelftools, not gimli, and decides what is live by its own rule: a
subprogram is in the image when it starts exactly where an ELF function symbol starts and
is no larger than that symbol; a line sequence when it starts where such a subprogram of its
unit starts. Debug information of discarded code (addresses resolved to 0 by the linker)
fails both rules.
"""
import bisect
import json
import sys

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection


def die_ranges(die, cu, range_lists):
    attrs = die.attributes
    if "DW_AT_ranges" in attrs:
        if range_lists is None:
            return []
        base = cu.get_top_DIE().attributes.get("DW_AT_low_pc")
        base = base.value if base else 0
        out = []
        for e in range_lists.get_range_list_at_offset(attrs["DW_AT_ranges"].value, cu=cu):
            if hasattr(e, "base_address"):
                base = e.base_address
                continue
            if getattr(e, "is_absolute", False):
                b, t = e.begin_offset, e.end_offset
            else:
                b, t = base + e.begin_offset, base + e.end_offset
            if b < t:
                out.append((b, t))
        return out
    if "DW_AT_low_pc" in attrs and "DW_AT_high_pc" in attrs:
        lo = attrs["DW_AT_low_pc"].value
        hi = attrs["DW_AT_high_pc"]
        end = lo + hi.value if hi.form != "DW_FORM_addr" else hi.value
        return [(lo, end)] if lo < end else []
    return []


def name_of(die, depth=0):
    if depth > 16:
        return None
    a = die.attributes
    for key in ("DW_AT_linkage_name", "DW_AT_MIPS_linkage_name"):
        if key in a:
            return a[key].value.decode("utf-8", "replace")
    if "DW_AT_name" in a:
        return a["DW_AT_name"].value.decode("utf-8", "replace")
    for key in ("DW_AT_abstract_origin", "DW_AT_specification"):
        if key in a:
            return name_of(die.get_DIE_from_attribute(key), depth + 1)
    return None


def file_names(lineprog, cu):
    """File table entries as full paths, by index (DWARF 4 numbers from 1)."""
    header = lineprog.header
    version = header["version"]
    comp_dir = cu.get_top_DIE().attributes.get("DW_AT_comp_dir")
    comp_dir = comp_dir.value.decode() if comp_dir else ""
    dirs = [d.decode() if isinstance(d, bytes) else d for d in header["include_directory"]]
    names = {}
    for i, entry in enumerate(header["file_entry"]):
        index = i if version >= 5 else i + 1
        name = entry.name.decode() if isinstance(entry.name, bytes) else entry.name
        d = entry.dir_index
        if version >= 5:
            directory = dirs[d] if d < len(dirs) else ""
        else:
            directory = dirs[d - 1] if 0 < d <= len(dirs) else comp_dir
        if name.startswith("/"):
            names[index] = name
        elif directory.startswith("/"):
            names[index] = directory + "/" + name
        else:
            names[index] = "/".join(p for p in (comp_dir, directory, name) if p)
    return names


def main():
    path = sys.argv[1]
    with open(path, "rb") as f:
        elf = ELFFile(f)
        symbols = {}
        for sec in elf.iter_sections():
            if isinstance(sec, SymbolTableSection):
                for s in sec.iter_symbols():
                    if s["st_info"]["type"] == "STT_FUNC" and s["st_size"] > 0:
                        start = s["st_value"] & ~1
                        symbols.setdefault(start, (start + s["st_size"], s.name))
        starts = sorted(symbols)

        def symbol_at(addr):
            i = bisect.bisect_right(starts, addr) - 1
            if i >= 0 and addr < symbols[starts[i]][0]:
                return starts[i]
            return None

        dwarf = elf.get_dwarf_info()
        range_lists = dwarf.range_lists()
        functions = []  # (begin, end, die, cu, lines)
        for cu in dwarf.iter_CUs():
            live_starts = set()
            cu_functions = []
            for die in cu.iter_DIEs():
                if die.tag != "DW_TAG_subprogram":
                    continue
                for b, e in die_ranges(die, cu, range_lists):
                    if b in symbols and e <= symbols[b][0]:
                        cu_functions.append((b, e, die, cu))
                        live_starts.add(b)
            lines = []
            prog = dwarf.line_program_for_CU(cu)
            if prog is not None:
                files = file_names(prog, cu)
                seq = []
                for entry in prog.get_entries():
                    st = entry.state
                    if st is None:
                        continue
                    if st.end_sequence:
                        if seq and seq[0][0] in live_starts:
                            lines.append((seq[0][0], st.address, seq))
                        seq = []
                        continue
                    row = (st.address, files.get(st.file), st.line)
                    if seq and seq[-1][0] == st.address:
                        seq[-1] = row
                    else:
                        seq.append(row)
            for f in cu_functions:
                functions.append(f + (lines,))
        functions.sort(key=lambda f: f[0])
        fstarts = [f[0] for f in functions]

        def location(lines, addr):
            for start, end, rows in lines:
                if start <= addr < end:
                    best = None
                    for r in rows:
                        if r[0] <= addr:
                            best = r
                        else:
                            break
                    if best:
                        return best[1], (best[2] or None)
            return None, None

        def inlined_chain(die, addr, cu):
            chain = []
            node = die
            while True:
                found = None
                stack = list(node.iter_children())
                while stack:
                    child = stack.pop(0)
                    if child.tag == "DW_TAG_inlined_subroutine":
                        if any(b <= addr < e for b, e in die_ranges(child, cu, range_lists)):
                            found = child
                            break
                    elif child.tag in ("DW_TAG_lexical_block",):
                        stack[:0] = list(child.iter_children())
                if found is None:
                    return chain
                chain.append(found)
                node = found

        for text in sys.stdin:
            text = text.strip()
            if not text:
                continue
            addr = int(text, 16)
            out = {"addr": addr, "symbol": None, "frames": []}
            s = symbol_at(addr)
            if s is not None:
                out["symbol"] = symbols[s][1]
                i = bisect.bisect_right(fstarts, addr) - 1
                if i >= 0 and functions[i][0] <= addr < functions[i][1] and symbol_at(functions[i][0]) == s:
                    begin, end, die, cu, lines = functions[i]
                    chain = inlined_chain(die, addr, cu)
                    file, line = location(lines, addr)
                    frames = []
                    lp = dwarf.line_program_for_CU(cu)
                    files = file_names(lp, cu) if lp is not None else {}
                    for inl in reversed(chain):
                        frames.append({"name": name_of(inl), "file": file, "line": line})
                        cf = inl.attributes.get("DW_AT_call_file")
                        cl = inl.attributes.get("DW_AT_call_line")
                        file = files.get(cf.value) if cf else None
                        line = (cl.value or None) if cl else None
                    frames.append({"name": name_of(die), "file": file, "line": line})
                    out["frames"] = frames
            print(json.dumps(out))


if __name__ == "__main__":
    main()

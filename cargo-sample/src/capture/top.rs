//! The live "top" view: while a ring is read (`--live`, `--duration`, board runs), a table of
//! the hottest functions so far, with their shares and intervals, the samples taken and lost
//! and the rate, redrawn in place on a terminal (like orbtop); for an Embassy image whose
//! samples carry the task being polled, a table of the tasks by their share too. The full
//! report follows at the end; where standard error is not a terminal nothing is drawn.

use std::collections::HashMap;
use std::fmt::Write;
use std::time::Instant;

use crate::analysis::stats::{Z95, wilson};
use crate::capture::live::Live;

/// The functions of an image, and the counts of the samples seen so far.
#[derive(Debug)]
pub struct Top {
    /// `(start, end, name)`, sorted by start.
    functions: Vec<(u64, u64, String)>,
    counts: HashMap<usize, u64>,
    outside: u64,
    /// Embassy task pools `(task, start, end)`, and the samples seen per task and outside any.
    tasks: Vec<crate::image::elf::TaskPool>,
    by_task: HashMap<usize, u64>,
    between: u64,
    /// Samples already counted (a prefix of `Live::pcs`).
    seen: usize,
    started: Instant,
}

/// Samples outside every function symbol (the report's own name for them, which this layer
/// below the report spells out).
const OUTSIDE: &str = "[outside the image's functions]";

/// Rows shown.
pub const ROWS: usize = 10;

/// The function symbols of an image (empty when it has none), for [`Top::new`].
pub fn functions_of(elf: &[u8]) -> Vec<(u64, u64, String)> {
    crate::image::symbolize::Symbolizer::new(std::path::Path::new(""), elf, None)
        .map(|s| s.all_functions())
        .unwrap_or_default()
}

impl Top {
    pub fn new(mut functions: Vec<(u64, u64, String)>) -> Top {
        functions.sort_by_key(|f| f.0);
        Top {
            functions,
            counts: HashMap::new(),
            outside: 0,
            tasks: Vec::new(),
            by_task: HashMap::new(),
            between: 0,
            seen: 0,
            started: Instant::now(),
        }
    }

    /// Count the samples' tasks too: an Embassy image's task pools (a sample's tag is the
    /// header address of the task being polled).
    pub fn with_tasks(mut self, tasks: Vec<crate::image::elf::TaskPool>) -> Top {
        self.tasks = tasks;
        self
    }

    fn count_tasks(&mut self, tags: &[u32]) {
        for &t in tags {
            match self.tasks.iter().position(|p| t >= p.1 && t < p.2) {
                Some(i) => *self.by_task.entry(i).or_default() += 1,
                None => self.between += 1,
            }
        }
    }

    fn count(&mut self, pcs: &[u32]) {
        for &pc in pcs {
            let pc = pc as u64 & !1;
            let i = self.functions.partition_point(|f| f.0 <= pc);
            match i.checked_sub(1).filter(|&j| pc < self.functions[j].1) {
                Some(j) => *self.counts.entry(j).or_default() += 1,
                None => self.outside += 1,
            }
        }
    }

    /// The table for the samples read so far (the new ones are counted first).
    pub fn table(&mut self, label: &str, l: &Live) -> String {
        if l.pcs.len() > self.seen {
            let new = l.pcs[self.seen..].to_vec();
            self.count(&new);
            if !self.tasks.is_empty() && l.tags.len() == l.pcs.len() {
                let tags = l.tags[self.seen..].to_vec();
                self.count_tasks(&tags);
            }
            self.seen = l.pcs.len();
        }
        let n = self.seen as u64;
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let mut s = format!(
            "{label}: {} samples, {} lost · {:.0} samples/s",
            n,
            l.lost,
            (n + l.lost) as f64 / secs
        );
        if n == 0 {
            return s;
        }
        let mut rows: Vec<(&str, u64)> = self
            .counts
            .iter()
            .map(|(&i, &k)| (self.functions[i].2.as_str(), k))
            .collect();
        if self.outside > 0 {
            rows.push((OUTSIDE, self.outside));
        }
        rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let _ = write!(s, "\n   share      95% interval   function");
        for (name, k) in rows.iter().take(ROWS) {
            let (lo, hi) = wilson(*k, n, Z95);
            let _ = write!(
                s,
                "\n {:>6.2}%  [{:>6.2}, {:>6.2}]%   {name}",
                100.0 * *k as f64 / n as f64,
                100.0 * lo,
                100.0 * hi
            );
        }
        if rows.len() > ROWS {
            let _ = write!(s, "\n   ... {} more functions", rows.len() - ROWS);
        }
        if !self.by_task.is_empty() {
            let mut tasks: Vec<(&str, u64)> = self
                .by_task
                .iter()
                .map(|(&i, &k)| (self.tasks[i].0.as_str(), k))
                .collect();
            tasks.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
            tasks.push(("[no task: the executor, idle, handlers]", self.between));
            let _ = write!(s, "\n   share      95% interval   Embassy task");
            for (name, k) in tasks {
                let (lo, hi) = wilson(k, n, Z95);
                let _ = write!(
                    s,
                    "\n {:>6.2}%  [{:>6.2}, {:>6.2}]%   {name}",
                    100.0 * k as f64 / n as f64,
                    100.0 * lo,
                    100.0 * hi
                );
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_counts_what_arrived_and_sorts_by_share() {
        let mut t = Top::new(vec![(0x200, 0x300, "b".into()), (0x100, 0x200, "a".into())]);
        let mut l = Live::default();
        l.pcs = vec![0x101, 0x150, 0x250, 0x400];
        let s = t.table("run", &l);
        assert!(s.starts_with("run: 4 samples, 0 lost"), "{s}");
        let lines: Vec<&str> = s.lines().collect();
        assert!(
            lines[2].contains("50.00%") && lines[2].ends_with(" a"),
            "{s}"
        );
        assert!(lines[3].contains("25.00%"), "{s}");
        // Only the new samples are counted at the next call.
        l.pcs.push(0x260);
        l.pcs.push(0x270);
        let s = t.table("run", &l);
        assert!(s.lines().nth(2).unwrap().ends_with(" b"), "{s}");
        assert!(s.lines().nth(2).unwrap().contains("50.00%"), "{s}");
    }

    #[test]
    fn an_embassy_images_samples_are_counted_by_task_too() {
        let pools = vec![
            ("app::motor".to_owned(), 0x2000_0000, 0x2000_0040),
            ("app::link".to_owned(), 0x2000_0040, 0x2000_0080),
        ];
        let mut t = Top::new(vec![(0x100, 0x200, "a".into())]).with_tasks(pools);
        let mut l = Live::default();
        l.pcs = vec![0x101, 0x102, 0x103, 0x104];
        l.tags = vec![0x2000_0000, 0x2000_0044, 0x2000_0000, 0];
        let s = t.table("run", &l);
        let tasks: Vec<&str> = s
            .lines()
            .skip_while(|l| !l.ends_with("Embassy task"))
            .skip(1)
            .collect();
        assert_eq!(tasks.len(), 3, "{s}");
        assert!(
            tasks[0].contains("50.00%") && tasks[0].ends_with("app::motor"),
            "{s}"
        );
        assert!(
            tasks[1].contains("25.00%") && tasks[1].ends_with("app::link"),
            "{s}"
        );
        assert!(
            tasks[2].contains("25.00%") && tasks[2].contains("[no task"),
            "{s}"
        );
    }
}

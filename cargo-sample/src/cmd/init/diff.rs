//! A unified diff of two texts, with context lines and hunk headers, for showing what `init`
//! changes.

/// One line of an edit script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Same(usize, usize),
    Del(usize),
    Add(usize),
}

fn script(a: &[&str], b: &[&str]) -> Vec<Op> {
    // Common prefix and suffix first: the edits `init` makes are small, so the table in the
    // middle stays small even for long files.
    let pre = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suf = a[pre..]
        .iter()
        .rev()
        .zip(b[pre..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[pre..a.len() - suf], &b[pre..b.len() - suf]);
    let mut lcs = vec![vec![0u32; mb.len() + 1]; ma.len() + 1];
    for i in (0..ma.len()).rev() {
        for j in (0..mb.len()).rev() {
            lcs[i][j] = if ma[i] == mb[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut ops: Vec<Op> = (0..pre).map(|i| Op::Same(i, i)).collect();
    let (mut i, mut j) = (0, 0);
    while i < ma.len() || j < mb.len() {
        if i < ma.len() && j < mb.len() && ma[i] == mb[j] {
            ops.push(Op::Same(pre + i, pre + j));
            i += 1;
            j += 1;
        } else if i < ma.len() && (j == mb.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(Op::Del(pre + i));
            i += 1;
        } else {
            ops.push(Op::Add(pre + j));
            j += 1;
        }
    }
    for k in 0..suf {
        ops.push(Op::Same(a.len() - suf + k, b.len() - suf + k));
    }
    ops
}

/// `--- name` / `+++ name` and hunks with `context` unchanged lines around each change; empty
/// when the texts are equal.
pub fn unified(name: &str, old: &str, new: &str, context: usize) -> String {
    if old == new {
        return String::new();
    }
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let ops = script(&a, &b);
    let changed: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|(_, o)| !matches!(o, Op::Same(..)))
        .map(|(k, _)| k)
        .collect();
    let mut out = format!("--- {name}\n+++ {name}\n");
    let mut k = 0;
    while k < changed.len() {
        let start = changed[k].saturating_sub(context);
        let mut end = changed[k];
        // Merge changes whose contexts touch.
        while k + 1 < changed.len() && changed[k + 1] <= end + 2 * context + 1 {
            k += 1;
            end = changed[k];
        }
        let end = (end + context + 1).min(ops.len());
        let hunk = &ops[start..end];
        let first_a = hunk
            .iter()
            .find_map(|o| match o {
                Op::Same(i, _) | Op::Del(i) => Some(*i),
                _ => None,
            })
            .unwrap_or(0);
        let first_b = hunk
            .iter()
            .find_map(|o| match o {
                Op::Same(_, j) | Op::Add(j) => Some(*j),
                _ => None,
            })
            .unwrap_or(0);
        let len_a = hunk.iter().filter(|o| !matches!(o, Op::Add(_))).count();
        let len_b = hunk.iter().filter(|o| !matches!(o, Op::Del(_))).count();
        out.push_str(&format!(
            "@@ -{},{len_a} +{},{len_b} @@\n",
            first_a + 1,
            first_b + 1
        ));
        for o in hunk {
            match *o {
                Op::Same(i, _) => out.push_str(&format!(" {}\n", a[i])),
                Op::Del(i) => out.push_str(&format!("-{}\n", a[i])),
                Op::Add(j) => out.push_str(&format!("+{}\n", b[j])),
            }
        }
        k += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hunks_carry_context_and_positions() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nX\ne\nf\ng\nh\n";
        let d = unified("f.rs", old, new, 2);
        assert_eq!(
            d,
            "--- f.rs\n+++ f.rs\n@@ -3,4 +3,5 @@\n c\n d\n+X\n e\n f\n"
        );
        assert_eq!(unified("f", old, old, 3), "");
    }

    #[test]
    fn far_apart_changes_make_two_hunks() {
        let old: String = (0..30).map(|i| format!("l{i}\n")).collect();
        let new = old.replace("l2\n", "l2\nA\n").replace("l25\n", "B\n");
        let d = unified("f", &old, &new, 1);
        assert_eq!(d.matches("@@ ").count(), 2, "{d}");
        assert!(d.contains("+A\n") && d.contains("-l25\n+B\n"), "{d}");
    }
}

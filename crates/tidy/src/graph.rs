//! Strongly connected components of a directed graph (Tarjan's algorithm, without recursion).

/// The strongly connected components of the graph with nodes `0..n` and the given edges, each
/// sorted, in order of their smallest node.
pub fn components(n: usize, edges: &[(usize, usize)]) -> Vec<Vec<usize>> {
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b) in edges {
        next[a].push(b);
    }
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut counter = 0;
    let mut out = Vec::new();
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        // Each frame: a node and how many of its successors were visited.
        let mut frames = vec![(root, 0usize)];
        index[root] = counter;
        low[root] = counter;
        counter += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&(v, k)) = frames.last() {
            if let Some(&w) = next[v].get(k) {
                if let Some(top) = frames.last_mut() {
                    top.1 += 1;
                }
                if index[w] == usize::MAX {
                    index[w] = counter;
                    low[w] = counter;
                    counter += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    frames.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            frames.pop();
            if let Some(&(parent, _)) = frames.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                component.sort_unstable();
                out.push(component);
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_cycles() {
        // 0 → 1 → 2 → 0 is a circle; 3 ↔ 4 another; 5 hangs off it; 6 loops on itself.
        let edges = [
            (0, 1),
            (1, 2),
            (2, 0),
            (2, 3),
            (3, 4),
            (4, 3),
            (4, 5),
            (6, 6),
        ];
        let got = components(7, &edges);
        assert_eq!(got, [vec![0, 1, 2], vec![3, 4], vec![5], vec![6]]);
    }

    #[test]
    fn long_chain_does_not_overflow() {
        let n = 100_000;
        let mut edges: Vec<(usize, usize)> = (0..n - 1).map(|i| (i, i + 1)).collect();
        edges.push((n - 1, 0));
        let got = components(n, &edges);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].len(), n);
    }
}

//! The layer tables of ARCHITECTURE.md.
//!
//! ```text
//! <!-- tidy:layers crates/gateway/src -->
//! | layer | modules |
//! |---|---|
//! | server | `lib`, `server` |
//! | ground | `ids`, `clock` |
//! <!-- /tidy:layers -->
//! ```
//!
//! Top layer first. The first column names the layer, the second lists the top-level modules of
//! the directory in backticks.

/// One `<!-- tidy:layers DIR -->` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerTable {
    /// The source directory, relative to the repository root: `crates/gateway/src`.
    pub dir: String,
    /// The line of the opening marker.
    pub line: usize,
    /// Top layer first.
    pub layers: Vec<Layer>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    pub name: String,
    pub modules: Vec<String>,
    /// The line of the table row.
    pub line: usize,
}

/// Something wrong with a table itself, at a line of ARCHITECTURE.md.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableProblem {
    pub line: usize,
    pub message: String,
}

const OPEN: &str = "<!-- tidy:layers";
const CLOSE: &str = "<!-- /tidy:layers -->";

impl LayerTable {
    /// The layer of a module: its index (0 = top) and name.
    pub fn layer_of(&self, module: &str) -> Option<(usize, &str)> {
        self.layers
            .iter()
            .enumerate()
            .find(|(_, l)| l.modules.iter().any(|m| m == module))
            .map(|(i, l)| (i, l.name.as_str()))
    }
}

/// Every layer table of a Markdown text, and the problems found in them.
pub fn parse(text: &str) -> (Vec<LayerTable>, Vec<TableProblem>) {
    let mut tables: Vec<LayerTable> = Vec::new();
    let mut problems = Vec::new();
    // The table being read, and how many of its rows were seen (the first is the header).
    let mut open: Option<(LayerTable, usize)> = None;
    for (n, raw) in text.lines().enumerate() {
        let line = n + 1;
        let trimmed = raw.trim();
        if trimmed.starts_with(CLOSE) {
            match open.take() {
                Some((table, _)) => {
                    if let Some(table) = finish(table, &tables, &mut problems) {
                        tables.push(table);
                    }
                }
                None => problems.push(problem(
                    line,
                    "a closing `<!-- /tidy:layers -->` without an opening marker",
                )),
            }
        } else if let Some(rest) = trimmed.strip_prefix(OPEN) {
            if let Some((table, _)) = open.take() {
                problems.push(problem(table.line, NOT_CLOSED));
            }
            let dir = rest
                .trim()
                .trim_end_matches("-->")
                .trim()
                .trim_end_matches('/');
            if dir.is_empty() {
                problems.push(problem(
                    line,
                    "the marker names no directory: `<!-- tidy:layers crates/x/src -->`",
                ));
            }
            let table = LayerTable {
                dir: dir.to_string(),
                line,
                layers: Vec::new(),
            };
            open = Some((table, 0));
        } else if let Some((table, rows)) = open.as_mut() {
            match row(trimmed) {
                Row::Other | Row::Separator => {}
                Row::Cells(name, modules) => {
                    *rows += 1;
                    if !modules.is_empty() {
                        table.layers.push(Layer {
                            name,
                            modules,
                            line,
                        });
                    } else if *rows > 1 {
                        problems.push(problem(
                            line,
                            "this row lists no modules; write them in backticks: `a`, `b`",
                        ));
                    }
                }
            }
        }
    }
    if let Some((table, _)) = open {
        problems.push(problem(table.line, NOT_CLOSED));
    }
    (tables, problems)
}

const NOT_CLOSED: &str = "this layer table is not closed with `<!-- /tidy:layers -->`";

/// Checks a finished table for duplicates; returns it unless its directory already has one.
fn finish(
    table: LayerTable,
    done: &[LayerTable],
    problems: &mut Vec<TableProblem>,
) -> Option<LayerTable> {
    if let Some(first) = done.iter().find(|t| t.dir == table.dir) {
        problems.push(problem(
            table.line,
            &format!(
                "a second layer table for `{}` (the first is at line {})",
                table.dir, first.line
            ),
        ));
        return None;
    }
    if table.layers.is_empty() {
        problems.push(problem(table.line, "this layer table has no rows"));
    }
    for (i, layer) in table.layers.iter().enumerate() {
        if let Some(earlier) = table.layers[..i].iter().find(|l| l.name == layer.name) {
            problems.push(problem(
                layer.line,
                &format!(
                    "layer `{}` appears twice (also at line {})",
                    layer.name, earlier.line
                ),
            ));
        }
        for (k, module) in layer.modules.iter().enumerate() {
            let again_here = layer.modules[..k].contains(module);
            let earlier = table.layers[..i]
                .iter()
                .find(|l| l.modules.contains(module));
            if again_here || earlier.is_some() {
                let other = earlier.map_or(layer.name.as_str(), |l| l.name.as_str());
                problems.push(problem(
                    layer.line,
                    &format!("module `{module}` is listed twice (layers `{other}` and `{}`); list it once", layer.name),
                ));
            }
        }
    }
    Some(table)
}

enum Row {
    Other,
    Separator,
    /// The first cell (the layer's name) and the names in backticks of the second.
    Cells(String, Vec<String>),
}

/// A table row: `| name | `a`, `b` |`.
fn row(line_text: &str) -> Row {
    let Some(inner) = line_text.strip_prefix('|') else {
        return Row::Other;
    };
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let cells: Vec<&str> = inner.split('|').map(str::trim).collect();
    if cells
        .iter()
        .all(|c| c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
    {
        return Row::Separator;
    }
    let name = cells[0]
        .trim_matches(|c| c == '`' || c == '*')
        .trim()
        .to_string();
    Row::Cells(name, backticked(cells.get(1).copied().unwrap_or("")))
}

fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(|m| {
            m.trim()
                .trim_end_matches(".rs")
                .trim_end_matches('/')
                .to_string()
        })
        .filter(|m| !m.is_empty())
        .collect()
}

fn problem(line: usize, message: &str) -> TableProblem {
    TableProblem {
        line,
        message: message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "# Architecture\n\ntext\n<!-- tidy:layers crates/gateway/src -->\n| layer | modules |\n|---|---|\n| server | `lib`, `server`, `web` |\n| requests | `handlers` |\n| ground | `ids`, `hub.rs`, `agent/` |\n<!-- /tidy:layers -->\n\n<!-- tidy:layers crates/store/src/ -->\n| layer | modules |\n|:--|:--|\n| top | `lib` |\n<!-- /tidy:layers -->\n";

    #[test]
    fn parses_tables() {
        let (tables, problems) = parse(DOC);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(tables.len(), 2);
        let t = &tables[0];
        assert_eq!(t.dir, "crates/gateway/src");
        assert_eq!(t.line, 4);
        let names: Vec<&str> = t.layers.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["server", "requests", "ground"]);
        assert_eq!(t.layers[2].modules, ["ids", "hub", "agent"]);
        assert_eq!(t.layers[2].line, 9);
        assert_eq!(t.layer_of("handlers"), Some((1, "requests")));
        assert_eq!(t.layer_of("nope"), None);
        assert_eq!(tables[1].dir, "crates/store/src");
    }

    #[test]
    fn reports_broken_tables() {
        let doc = "<!-- tidy:layers a/src -->\n| l | m |\n|---|---|\n| x | `a`, `b` |\n| y | `b` |\n| x | `c` |\n| z | none |\n<!-- tidy:layers b/src -->\n";
        let (tables, problems) = parse(doc);
        let lines: Vec<usize> = problems.iter().map(|p| p.line).collect();
        // Row without modules (7), table a not closed (1), b not closed (8); the unclosed table
        // is not used, so the duplicates inside it are not checked.
        assert_eq!(lines, [7, 1, 8], "{problems:?}");
        assert!(tables.is_empty());
        let closed = format!(
            "{}<!-- /tidy:layers -->\n",
            &doc[..doc.find("<!-- tidy:layers b").unwrap_or(0)]
        );
        let (_, problems) = parse(&closed);
        let lines: Vec<usize> = problems.iter().map(|p| p.line).collect();
        assert_eq!(lines, [7, 5, 6], "{problems:?}");
    }
}

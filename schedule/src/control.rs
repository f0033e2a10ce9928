//! Loops and branches around scheduled graphs, as plain data: what a program with `while`
//! and `case` blocks *is*, not how it runs.
//!
//! A [`Program`] is an outer [`Graph`] in which some nodes stand for a whole [`Control`]: a
//! `while` that repeats a body while a [`Condition`] holds, or a `case` that runs the first
//! branch whose condition holds. Each body is a [`Block`], a graph of its own scheduled
//! separately. Conditions and [`Update`]s read and change integer [`Counter`]s, so a loop's
//! trip count can depend on what its body computed; both are written `COUNTER OP INTEGER`.
//!
//! Deciding a condition, applying an update and reading either from text are here; submitting
//! a body to streams and waiting for it belong to whoever runs the program.

use std::collections::HashMap;

use crate::graph::{Graph, NodeId};

/// A counter: an integer that nodes update when they run and conditions read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counter {
    /// Its name.
    pub name: String,
    /// Its value before anything runs.
    pub initial: i64,
}

/// Whether `name` can name a counter: ASCII letters, digits and `_`, not starting with a digit.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Splits `COUNTER OP INTEGER` (separated by spaces) and looks the counter up; `what` and
/// `operators` word the error.
fn split_expression<'t>(
    text: &'t str,
    counters: &HashMap<&str, usize>,
    what: &str,
    operators: &str,
) -> Result<(usize, &'t str, i64), String> {
    let shape = || format!("{what} `{text}` must read `COUNTER OP INTEGER`, OP one of {operators}");
    let words: Vec<&str> = text.split_whitespace().collect();
    let [counter, operator, value] = words[..] else { return Err(shape()) };
    let Some(&counter) = counters.get(counter) else {
        return Err(format!("{what} `{text}` reads unknown counter `{counter}`"));
    };
    let value = value.parse::<i64>().map_err(|_| shape())?;
    Ok((counter, operator, value))
}

/// How a [`Condition`] compares its counter with its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comparison {
    /// `<`
    Less,
    /// `<=`
    AtMost,
    /// `>`
    Greater,
    /// `>=`
    AtLeast,
    /// `==`
    Equal,
    /// `!=`
    NotEqual,
}

/// A run-time condition: a counter compared with a constant, e.g. `residual > 10`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Condition {
    /// The counter read (an index into the program's counters).
    pub counter: usize,
    /// How it is compared.
    pub comparison: Comparison,
    /// With what.
    pub value: i64,
}

impl Condition {
    const OPERATORS: &'static str = "< <= > >= == !=";

    /// Reads `COUNTER OP INTEGER`; `counters` maps names to indices. The error is a sentence
    /// naming the text and what is wrong with it.
    pub fn parse(text: &str, counters: &HashMap<&str, usize>) -> Result<Condition, String> {
        let (counter, operator, value) =
            split_expression(text, counters, "condition", Self::OPERATORS)?;
        let comparison = match operator {
            "<" => Comparison::Less,
            "<=" => Comparison::AtMost,
            ">" => Comparison::Greater,
            ">=" => Comparison::AtLeast,
            "==" => Comparison::Equal,
            "!=" => Comparison::NotEqual,
            _ => {
                return Err(format!(
                    "condition `{text}` compares with `{operator}`, not one of {}",
                    Self::OPERATORS
                ))
            }
        };
        Ok(Condition { counter, comparison, value })
    }

    /// Whether it holds for the counters' `values` (indexed as the program's counters).
    pub fn holds(&self, values: &[i64]) -> bool {
        let current = values[self.counter];
        match self.comparison {
            Comparison::Less => current < self.value,
            Comparison::AtMost => current <= self.value,
            Comparison::Greater => current > self.value,
            Comparison::AtLeast => current >= self.value,
            Comparison::Equal => current == self.value,
            Comparison::NotEqual => current != self.value,
        }
    }

    /// The condition as it is written, with `counters` naming the counter.
    pub fn describe(&self, counters: &[Counter]) -> String {
        let operator = match self.comparison {
            Comparison::Less => "<",
            Comparison::AtMost => "<=",
            Comparison::Greater => ">",
            Comparison::AtLeast => ">=",
            Comparison::Equal => "==",
            Comparison::NotEqual => "!=",
        };
        format!("{} {operator} {}", counters[self.counter].name, self.value)
    }
}

/// How an [`Update`] changes its counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// `=`
    Set,
    /// `+=`
    Add,
    /// `-=`
    Subtract,
    /// `*=`
    Multiply,
    /// `/=` (rounding toward zero; dividing by 0 is refused when the update is read)
    Divide,
}

/// What a node does to a counter when it has run, e.g. `residual /= 3`. Arithmetic saturates
/// at the limits of `i64`, so no update can overflow or panic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Update {
    /// The counter changed (an index into the program's counters).
    pub counter: usize,
    /// How.
    pub change: Change,
    /// By what.
    pub value: i64,
}

impl Update {
    const OPERATORS: &'static str = "= += -= *= /=";

    /// Reads `COUNTER OP INTEGER`; `counters` maps names to indices. Division by zero is
    /// refused here, so [`apply`](Self::apply) never divides by zero.
    pub fn parse(text: &str, counters: &HashMap<&str, usize>) -> Result<Update, String> {
        let (counter, operator, value) =
            split_expression(text, counters, "update", Self::OPERATORS)?;
        let change = match operator {
            "=" => Change::Set,
            "+=" => Change::Add,
            "-=" => Change::Subtract,
            "*=" => Change::Multiply,
            "/=" if value == 0 => return Err(format!("update `{text}` divides by zero")),
            "/=" => Change::Divide,
            _ => {
                return Err(format!(
                    "update `{text}` changes with `{operator}`, not one of {}",
                    Self::OPERATORS
                ))
            }
        };
        Ok(Update { counter, change, value })
    }

    /// Applies the update to the counters' `values` (indexed as the program's counters).
    pub fn apply(&self, values: &mut [i64]) {
        let current = &mut values[self.counter];
        *current = match self.change {
            Change::Set => self.value,
            Change::Add => current.saturating_add(self.value),
            Change::Subtract => current.saturating_sub(self.value),
            Change::Multiply => current.saturating_mul(self.value),
            Change::Divide => current.saturating_div(self.value),
        };
    }
}

/// A graph that runs as a unit inside a `while` or `case`.
#[derive(Debug)]
pub struct Block {
    /// Its nodes (names local to the block; devices those of the program's graph).
    pub graph: Graph,
    /// What each node does to a counter when it has run, by node.
    pub updates: Vec<Option<Update>>,
}

/// What a control node does. Deliberately exhaustive: a new kind must be taken up by every
/// runner and printer that matches on it, not fall through a wildcard.
#[derive(Debug)]
pub enum ControlKind {
    /// Runs `body` again and again while `condition` holds (checked before each iteration).
    While {
        /// Read before each iteration, after the previous one has finished.
        condition: Condition,
        /// The loop's body.
        body: Block,
    },
    /// Runs the first branch whose condition holds (a branch without one always holds), or
    /// none.
    Case {
        /// The branches in the order they are tried.
        branches: Vec<(Option<Condition>, Block)>,
    },
}

/// A `while` or `case` block, standing as node [`node`](Self::node) of the program's graph.
#[derive(Debug)]
pub struct Control {
    /// Its node in [`Program::graph`].
    pub node: NodeId,
    /// What it runs.
    pub kind: ControlKind,
}

/// A graph with loops and branches: the outer graph, in which each [`Control`] is one node,
/// with the counters its conditions read and the updates its nodes make.
#[derive(Debug)]
pub struct Program {
    /// The outer graph: plain nodes and one node per control.
    pub graph: Graph,
    /// What each node of [`graph`](Self::graph) does to a counter when it has run, by node
    /// (`None` for controls and for the parts of multi-device nodes).
    pub updates: Vec<Option<Update>>,
    /// The counters conditions read, with their initial values.
    pub counters: Vec<Counter>,
    /// The `while` and `case` blocks, each standing as one node of the graph.
    pub controls: Vec<Control>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> HashMap<&'static str, usize> {
        HashMap::from([("x", 0), ("y", 1)])
    }

    fn condition(text: &str) -> Condition {
        Condition::parse(text, &names()).unwrap()
    }

    fn applied(text: &str, start: i64) -> i64 {
        let mut values = [start, 7];
        Update::parse(text, &names()).unwrap().apply(&mut values);
        assert_eq!(values[1], 7, "`{text}` changed another counter");
        values[0]
    }

    #[test]
    fn every_comparison_decides_below_at_and_above_its_value() {
        // (operator, holds at 4, holds at 5, holds at 6) against 5.
        let table = [
            ("<", true, false, false),
            ("<=", true, true, false),
            (">", false, false, true),
            (">=", false, true, true),
            ("==", false, true, false),
            ("!=", true, false, true),
        ];
        for (operator, below, at, above) in table {
            let condition = condition(&format!("x {operator} 5"));
            let decided = [4, 5, 6].map(|x| condition.holds(&[x, 0]));
            assert_eq!(decided, [below, at, above], "`x {operator} 5`");
        }
    }

    #[test]
    fn a_condition_reads_its_own_counter() {
        let condition = condition("y >= -3");
        assert_eq!(condition.counter, 1);
        assert!(condition.holds(&[i64::MIN, -3]));
        assert!(!condition.holds(&[i64::MAX, -4]));
    }

    #[test]
    fn a_condition_describes_itself_as_written() {
        let counters =
            [Counter { name: "x".into(), initial: 0 }, Counter { name: "y".into(), initial: 0 }];
        for text in ["x < 5", "y != -12", "x >= 9223372036854775807"] {
            assert_eq!(condition(text).describe(&counters), text);
        }
        assert_eq!(condition("  y   ==  3 ").describe(&counters), "y == 3");
    }

    #[test]
    fn bad_conditions_are_refused_with_a_reason() {
        let error = |text: &str| Condition::parse(text, &names()).unwrap_err();
        assert!(error("z < 1").contains("unknown counter `z`"));
        assert!(error("x = 1").contains("compares with `=`"));
        assert!(error("x < one").contains("must read `COUNTER OP INTEGER`"));
        assert!(error("x <").contains("must read `COUNTER OP INTEGER`"));
        assert!(error("x < 1 2").contains("must read `COUNTER OP INTEGER`"));
        assert!(error("x < 99999999999999999999").contains("must read"));
    }

    #[test]
    fn updates_change_their_counter() {
        assert_eq!(applied("x = -4", 10), -4);
        assert_eq!(applied("x += 3", 10), 13);
        assert_eq!(applied("x -= 3", 10), 7);
        assert_eq!(applied("x *= -3", 10), -30);
        assert_eq!(applied("x /= 3", 10), 3);
        assert_eq!(applied("x /= 3", -10), -3, "division rounds toward zero");
    }

    #[test]
    fn updates_saturate_at_the_limits() {
        assert_eq!(applied("x += 1", i64::MAX), i64::MAX);
        assert_eq!(applied("x -= 1", i64::MIN), i64::MIN);
        assert_eq!(applied("x += -1", i64::MIN), i64::MIN);
        assert_eq!(applied("x -= -1", i64::MAX), i64::MAX);
        assert_eq!(applied("x *= 2", i64::MAX / 2 + 1), i64::MAX);
        assert_eq!(applied("x *= 2", i64::MIN / 2 - 1), i64::MIN);
        assert_eq!(applied("x *= -1", i64::MIN), i64::MAX);
        assert_eq!(applied("x /= -1", i64::MIN), i64::MAX);
    }

    #[test]
    fn division_by_zero_is_refused_when_read() {
        let error = Update::parse("x /= 0", &names()).unwrap_err();
        assert_eq!(error, "update `x /= 0` divides by zero");
        // Zero is fine for every other change.
        assert_eq!(applied("x *= 0", 10), 0);
        assert_eq!(applied("x += 0", 10), 10);
    }

    #[test]
    fn bad_updates_are_refused_with_a_reason() {
        let error = |text: &str| Update::parse(text, &names()).unwrap_err();
        assert!(error("z += 1").contains("unknown counter `z`"));
        assert!(error("x %= 2").contains("changes with `%=`"));
        assert!(error("x == 2").contains("changes with `==`"));
        assert!(error("x += 1.5").contains("must read `COUNTER OP INTEGER`"));
        assert!(error("").contains("must read `COUNTER OP INTEGER`"));
    }

    #[test]
    fn counter_names_are_identifiers() {
        for good in ["x", "_", "residual_2", "Big"] {
            assert!(is_identifier(good), "{good}");
        }
        for bad in ["", "2x", "a-b", "a b", "é"] {
            assert!(!is_identifier(bad), "{bad}");
        }
    }
}

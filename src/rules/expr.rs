//! The rule expression language: small, typed, parsed once at config load, evaluated per job.
//!
//! ```text
//! duration.p95 > 0.5 * timeout and since_last_completed > 2m
//! increase(checkpoints.failed, 15m) / increase(checkpoints.total, 15m) > 0.1
//! duration.p95 > 2 * ago(duration.p95, 1d) and duration.p95 > 1s
//! ```
//!
//! Numbers are in base units (seconds, bytes); literals may carry a unit (`500ms`, `5m`,
//! `100MB`, `50%`). Comparisons give booleans, `and`/`or`/`not` take booleans, arithmetic takes
//! numbers: a rule whose top level is not a boolean is refused at load time. A series with no
//! value (no checkpoint yet, no P95 in the window) makes the comparison false, as in PromQL.

use std::fmt;

/// A parsed, type-checked condition.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Condition {
    root: Expr,
    source: String,
}

#[derive(Clone, Debug, PartialEq)]
enum Expr {
    Number(f64),
    Series(String),
    Neg(Box<Expr>),
    Binary(Op, Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Call(Func, Vec<Expr>),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
    And,
    Or,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Func {
    /// `increase(series, window)`: how much a counter grew over the window.
    Increase,
    /// `ago(series, window)`: the series' value a window ago.
    Ago,
    /// `max(a, b)`.
    Max,
    /// `min(a, b)`.
    Min,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Type {
    Number,
    Bool,
}

/// Where a condition gets its values from (one job at one evaluation).
pub trait Context {
    /// The current value of a series, `None` when it has none.
    fn value(&self, series: &str) -> Option<f64>;
    /// How much a counter grew over the last `window_s` seconds.
    fn increase(&self, series: &str, window_s: f64) -> Option<f64>;
    /// The value a series had `window_s` seconds ago.
    fn ago(&self, series: &str, window_s: f64) -> Option<f64>;
    /// Whether `series` names something this context knows (checked at load time).
    fn knows(&self, series: &str) -> bool;
}

/// A syntax or type error, with the position in the expression.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message} at column {column} of `{expression}`")]
pub struct ParseError {
    message: String,
    column: usize,
    expression: String,
}

/// The result of evaluating a condition.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Outcome {
    /// Whether the condition holds.
    pub(crate) holds: bool,
    /// The value of the left side of the first comparison (the alert's `$value`).
    pub(crate) value: Option<f64>,
}

impl Condition {
    /// Parses and type-checks `source`; `knows` tells which series names exist.
    pub(crate) fn parse(source: &str, knows: &dyn Fn(&str) -> bool) -> Result<Condition, ParseError> {
        let tokens = tokenize(source)?;
        let mut parser = Parser { tokens, pos: 0, source };
        let root = parser.expr()?;
        if let Some(t) = parser.tokens.get(parser.pos) {
            return Err(parser.error_at(t.column, format!("unexpected `{}`", t.text)));
        }
        let ty = check(&root, knows).map_err(|message| ParseError {
            message,
            column: 1,
            expression: source.to_string(),
        })?;
        if ty != Type::Bool {
            return Err(ParseError {
                message: "expected a condition (a comparison), found a number".to_string(),
                column: 1,
                expression: source.to_string(),
            });
        }
        Ok(Condition { root, source: source.to_string() })
    }

    /// The series the condition reads.
    pub(crate) fn series(&self) -> Vec<String> {
        let mut out = Vec::new();
        collect_series(&self.root, &mut out);
        out.sort();
        out.dedup();
        out
    }

    /// The `(series, window in seconds)` of every `increase()` and `ago()` call: what the
    /// evaluator must keep a history of.
    pub(crate) fn windows(&self) -> Vec<(String, f64)> {
        fn walk(e: &Expr, out: &mut Vec<(String, f64)>) {
            match e {
                Expr::Call(Func::Increase | Func::Ago, args) => {
                    if let [Expr::Series(s), Expr::Number(w)] = &args[..] {
                        out.push((s.clone(), *w));
                    }
                }
                Expr::Call(_, args) => args.iter().for_each(|a| walk(a, out)),
                Expr::Neg(a) | Expr::Not(a) => walk(a, out),
                Expr::Binary(_, a, b) => {
                    walk(a, out);
                    walk(b, out);
                }
                Expr::Number(_) | Expr::Series(_) => {}
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out);
        out
    }

    /// Evaluates the condition.
    pub(crate) fn eval(&self, ctx: &dyn Context) -> Outcome {
        let holds = eval_bool(&self.root, ctx).unwrap_or(false);
        Outcome { holds, value: first_comparison_lhs(&self.root, ctx) }
    }
}

/// A number-valued expression (`increase(shadow.unexplained, 30m)`), for alert templates: the
/// numbers a description states are computed exactly as the condition computes them.
pub(crate) fn evaluate_number(source: &str, ctx: &dyn Context) -> Option<f64> {
    let tokens = tokenize(source).ok()?;
    let mut parser = Parser { tokens, pos: 0, source };
    let root = parser.expr().ok()?;
    if parser.pos != parser.tokens.len() || check(&root, &|s| ctx.knows(s)).ok()? != Type::Number {
        return None;
    }
    eval_number(&root, ctx)
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

fn collect_series(e: &Expr, out: &mut Vec<String>) {
    match e {
        Expr::Number(_) => {}
        Expr::Series(s) => out.push(s.clone()),
        Expr::Neg(a) | Expr::Not(a) => collect_series(a, out),
        Expr::Binary(_, a, b) => {
            collect_series(a, out);
            collect_series(b, out);
        }
        Expr::Call(_, args) => args.iter().for_each(|a| collect_series(a, out)),
    }
}

fn first_comparison_lhs(e: &Expr, ctx: &dyn Context) -> Option<f64> {
    match e {
        Expr::Binary(op, a, b) => match op {
            Op::Gt | Op::Ge | Op::Lt | Op::Le | Op::Eq | Op::Ne => eval_number(a, ctx),
            Op::And | Op::Or => first_comparison_lhs(a, ctx).or_else(|| first_comparison_lhs(b, ctx)),
            _ => None,
        },
        Expr::Not(a) => first_comparison_lhs(a, ctx),
        _ => None,
    }
}

fn check(e: &Expr, knows: &dyn Fn(&str) -> bool) -> Result<Type, String> {
    let number = |e: &Expr| -> Result<(), String> {
        match check(e, knows)? {
            Type::Number => Ok(()),
            Type::Bool => Err("expected a number, found a condition".to_string()),
        }
    };
    match e {
        Expr::Number(_) => Ok(Type::Number),
        Expr::Series(s) => {
            if knows(s) {
                Ok(Type::Number)
            } else {
                Err(format!("unknown series `{s}`"))
            }
        }
        Expr::Neg(a) => number(a).map(|_| Type::Number),
        Expr::Not(a) => match check(a, knows)? {
            Type::Bool => Ok(Type::Bool),
            Type::Number => Err("`not` expects a condition".to_string()),
        },
        Expr::Binary(op, a, b) => match op {
            Op::And | Op::Or => {
                for side in [a, b] {
                    if check(side, knows)? != Type::Bool {
                        return Err("`and`/`or` expect conditions on both sides".to_string());
                    }
                }
                Ok(Type::Bool)
            }
            Op::Add | Op::Sub | Op::Mul | Op::Div => {
                number(a)?;
                number(b)?;
                Ok(Type::Number)
            }
            _ => {
                number(a)?;
                number(b)?;
                Ok(Type::Bool)
            }
        },
        Expr::Call(func, args) => {
            let arity = 2;
            if args.len() != arity {
                return Err(format!("{func:?} takes {arity} arguments").to_lowercase());
            }
            if matches!(func, Func::Increase | Func::Ago) {
                if !matches!(args[0], Expr::Series(_)) {
                    return Err("the first argument of increase()/ago() must be a series name".to_string());
                }
                if !matches!(args[1], Expr::Number(_)) {
                    return Err(
                        "the second argument of increase()/ago() must be a duration like 15m".to_string()
                    );
                }
            }
            for a in args {
                number(a)?;
            }
            Ok(Type::Number)
        }
    }
}

fn eval_number(e: &Expr, ctx: &dyn Context) -> Option<f64> {
    match e {
        Expr::Number(n) => Some(*n),
        Expr::Series(s) => ctx.value(s),
        Expr::Neg(a) => eval_number(a, ctx).map(|v| -v),
        Expr::Binary(op, a, b) => {
            let (a, b) = (eval_number(a, ctx)?, eval_number(b, ctx)?);
            let v = match op {
                Op::Add => a + b,
                Op::Sub => a - b,
                Op::Mul => a * b,
                Op::Div if b == 0.0 => return None,
                Op::Div => a / b,
                _ => return None,
            };
            v.is_finite().then_some(v)
        }
        Expr::Call(func, args) => match (func, &args[..]) {
            (Func::Increase, [Expr::Series(s), Expr::Number(w)]) => ctx.increase(s, *w),
            (Func::Ago, [Expr::Series(s), Expr::Number(w)]) => ctx.ago(s, *w),
            (Func::Max, [a, b]) => Some(eval_number(a, ctx)?.max(eval_number(b, ctx)?)),
            (Func::Min, [a, b]) => Some(eval_number(a, ctx)?.min(eval_number(b, ctx)?)),
            _ => None,
        },
        Expr::Not(_) => None,
    }
}

fn eval_bool(e: &Expr, ctx: &dyn Context) -> Option<bool> {
    match e {
        Expr::Not(a) => eval_bool(a, ctx).map(|b| !b),
        Expr::Binary(Op::And, a, b) => {
            Some(eval_bool(a, ctx).unwrap_or(false) && eval_bool(b, ctx).unwrap_or(false))
        }
        Expr::Binary(Op::Or, a, b) => {
            Some(eval_bool(a, ctx).unwrap_or(false) || eval_bool(b, ctx).unwrap_or(false))
        }
        Expr::Binary(op, a, b) => {
            let (a, b) = (eval_number(a, ctx)?, eval_number(b, ctx)?);
            Some(match op {
                Op::Gt => a > b,
                Op::Ge => a >= b,
                Op::Lt => a < b,
                Op::Le => a <= b,
                Op::Eq => a == b,
                Op::Ne => a != b,
                _ => return None,
            })
        }
        _ => None,
    }
}

#[derive(Clone, Debug)]
struct Token {
    text: String,
    column: usize,
}

fn tokenize(source: &str) -> Result<Vec<Token>, ParseError> {
    let chars: Vec<char> = source.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let column = i + 1;
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit())) {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.' || chars[i] == '%')
            {
                i += 1;
            }
            tokens.push(Token { text: chars[start..i].iter().collect(), column });
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '.')
            {
                i += 1;
            }
            tokens.push(Token { text: chars[start..i].iter().collect(), column });
        } else {
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            let text = if [">=", "<=", "==", "!="].contains(&two.as_str()) {
                two
            } else if "+-*/()<>,".contains(c) {
                c.to_string()
            } else {
                return Err(ParseError {
                    message: format!("unexpected character `{c}`"),
                    column,
                    expression: source.to_string(),
                });
            };
            i += text.len();
            tokens.push(Token { text, column });
        }
    }
    Ok(tokens)
}

/// A number with an optional unit: `30s`, `500ms`, `5m`, `2h`, `1d`, `100MB`, `2GiB`, `50%`.
fn number_literal(text: &str) -> Option<f64> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: f64 = digits.parse().ok()?;
    let factor = match unit {
        "" => 1.0,
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        "%" => 0.01,
        "B" => 1.0,
        "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some(n * factor)
}

struct Parser<'a> {
    tokens: Vec<Token>,
    pos: usize,
    source: &'a str,
}

impl Parser<'_> {
    fn error_at(&self, column: usize, message: String) -> ParseError {
        ParseError { message, column, expression: self.source.to_string() }
    }

    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.pos).map(|t| t.text.as_str())
    }

    fn next(&mut self) -> Result<Token, ParseError> {
        let t = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        t.ok_or_else(|| {
            self.error_at(self.source.chars().count() + 1, "unexpected end of expression".to_string())
        })
    }

    fn expect(&mut self, text: &str) -> Result<(), ParseError> {
        let t = self.next()?;
        if t.text == text {
            Ok(())
        } else {
            Err(self.error_at(t.column, format!("expected `{text}`, found `{}`", t.text)))
        }
    }

    fn expr(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.and()?;
        while self.peek() == Some("or") {
            self.pos += 1;
            left = Expr::Binary(Op::Or, Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.not()?;
        while self.peek() == Some("and") {
            self.pos += 1;
            left = Expr::Binary(Op::And, Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Expr, ParseError> {
        if self.peek() == Some("not") {
            self.pos += 1;
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<Expr, ParseError> {
        let left = self.sum()?;
        let op = match self.peek() {
            Some(">") => Op::Gt,
            Some(">=") => Op::Ge,
            Some("<") => Op::Lt,
            Some("<=") => Op::Le,
            Some("==") => Op::Eq,
            Some("!=") => Op::Ne,
            _ => return Ok(left),
        };
        self.pos += 1;
        Ok(Expr::Binary(op, Box::new(left), Box::new(self.sum()?)))
    }

    fn sum(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.product()?;
        loop {
            let op = match self.peek() {
                Some("+") => Op::Add,
                Some("-") => Op::Sub,
                _ => return Ok(left),
            };
            self.pos += 1;
            left = Expr::Binary(op, Box::new(left), Box::new(self.product()?));
        }
    }

    fn product(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.unary()?;
        loop {
            let op = match self.peek() {
                Some("*") => Op::Mul,
                Some("/") => Op::Div,
                _ => return Ok(left),
            };
            self.pos += 1;
            left = Expr::Binary(op, Box::new(left), Box::new(self.unary()?));
        }
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        if self.peek() == Some("-") {
            self.pos += 1;
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, ParseError> {
        let t = self.next()?;
        if t.text == "(" {
            let inner = self.expr()?;
            self.expect(")")?;
            return Ok(inner);
        }
        if t.text.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
            return number_literal(&t.text).map(Expr::Number).ok_or_else(|| {
                self.error_at(t.column, format!("`{}` is not a number with a known unit", t.text))
            });
        }
        if t.text.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            let func = match t.text.as_str() {
                "increase" => Some(Func::Increase),
                "ago" => Some(Func::Ago),
                "max" => Some(Func::Max),
                "min" => Some(Func::Min),
                _ => None,
            };
            if let Some(func) = func.filter(|_| self.peek() == Some("(")) {
                self.pos += 1;
                let mut args = vec![self.expr()?];
                while self.peek() == Some(",") {
                    self.pos += 1;
                    args.push(self.expr()?);
                }
                self.expect(")")?;
                return Ok(Expr::Call(func, args));
            }
            if ["and", "or", "not"].contains(&t.text.as_str()) {
                return Err(self.error_at(t.column, format!("unexpected `{}`", t.text)));
            }
            return Ok(Expr::Series(t.text));
        }
        Err(self.error_at(t.column, format!("unexpected `{}`", t.text)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Values(HashMap<&'static str, f64>);

    impl Context for Values {
        fn value(&self, s: &str) -> Option<f64> {
            self.0.get(s).copied()
        }
        fn increase(&self, s: &str, w: f64) -> Option<f64> {
            self.0.get(s).map(|v| v * w / 60.0)
        }
        fn ago(&self, s: &str, _w: f64) -> Option<f64> {
            self.0.get(s).map(|v| v / 4.0)
        }
        fn knows(&self, s: &str) -> bool {
            self.0.contains_key(s)
        }
    }

    fn ctx() -> Values {
        Values(HashMap::from([
            ("duration.p95", 40.0),
            ("timeout", 60.0),
            ("checkpoints.failed", 1.0),
            ("checkpoints.total", 6.0),
        ]))
    }

    fn parse(s: &str) -> Result<Condition, ParseError> {
        let c = ctx();
        Condition::parse(s, &|name| c.knows(name))
    }

    #[test]
    fn conditions_evaluate_with_units_and_precedence() {
        let c = ctx();
        let cond = parse("duration.p95 > 0.5 * timeout and not duration.p95 >= 1m").unwrap();
        assert_eq!(cond.eval(&c), Outcome { holds: true, value: Some(40.0) });
        assert!(
            parse("increase(checkpoints.failed, 15m) / increase(checkpoints.total, 15m) > 10%")
                .unwrap()
                .eval(&c)
                .holds
        );
        assert!(parse("duration.p95 > 2 * ago(duration.p95, 1d)").unwrap().eval(&c).holds);
        assert!(!parse("duration.p95 > max(timeout, 50s)").unwrap().eval(&c).holds);
        assert!(parse("-(duration.p95 - 50) > 9.5 or timeout < 1").unwrap().eval(&c).holds);
    }

    #[test]
    fn a_missing_value_makes_the_comparison_false() {
        let c = ctx();
        let cond = Condition::parse("alignment.p95 > 1s", &|_| true).unwrap();
        assert_eq!(cond.eval(&c), Outcome { holds: false, value: None });
        let cond = Condition::parse("not alignment.p95 > 1s", &|_| true).unwrap();
        assert!(!cond.eval(&c).holds, "not of an absent comparison stays false");
    }

    #[test]
    fn errors_name_the_problem_and_the_column() {
        let e = parse("duration.p95 > ").unwrap_err().to_string();
        assert!(e.contains("unexpected end"), "{e}");
        let e = parse("duration.p95 > 5 parsecs").unwrap_err().to_string();
        assert!(e.contains("column 18"), "{e}");
        let e = parse("duration.p96 > 5s").unwrap_err().to_string();
        assert!(e.contains("unknown series `duration.p96`"), "{e}");
        let e = parse("duration.p95 * 2").unwrap_err().to_string();
        assert!(e.contains("expected a condition"), "{e}");
        let e = parse("(timeout > 1) + 2 > 3").unwrap_err().to_string();
        assert!(e.contains("expected a number"), "{e}");
        let e = parse("increase(timeout > 1, 5m) > 1").unwrap_err().to_string();
        assert!(e.contains("series name"), "{e}");
        let e = parse("timeout > 5 & 3").unwrap_err().to_string();
        assert!(e.contains("unexpected character `&`"), "{e}");
    }

    #[test]
    fn series_are_listed() {
        let cond = parse("duration.p95 > 0.5 * timeout and increase(checkpoints.failed, 5m) > 0").unwrap();
        assert_eq!(cond.series(), vec!["checkpoints.failed", "duration.p95", "timeout"]);
        assert_eq!(cond.windows(), vec![("checkpoints.failed".to_string(), 300.0)]);
    }
}

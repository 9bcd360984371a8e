//! Charts drawn on the server as inline SVG: stacked bars, lines and a status timeline. Each
//! is an image with a title and a text description (`role="img"`, `<title>`, `<desc>`), its
//! axes labelled in words, and each series told apart by a pattern or a dash as well as its
//! colour, with a legend that names it, so none needs colour to be read. No script, no
//! style attribute (the pages' content security policy allows neither).

use maud::{Markup, PreEscaped, html};

const W: f64 = 720.0;
const H: f64 = 190.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 30.0;

/// How a series is drawn: a fill pattern for bars and timeline segments, a dash for lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Look {
    Solid,
    Hatched,
    Dotted,
    Crossed,
}

impl Look {
    fn colour(self) -> &'static str {
        match self {
            Self::Solid => "#2f6f4f",
            Self::Hatched => "#b8860b",
            Self::Dotted => "#a33",
            Self::Crossed => "#555",
        }
    }

    fn fill(self, id: &str) -> String {
        match self {
            Self::Solid => self.colour().to_owned(),
            _ => format!("url(#{id}-{})", self.name()),
        }
    }

    fn dash(self) -> &'static str {
        match self {
            Self::Solid => "none",
            Self::Hatched => "8 4",
            Self::Dotted => "2 3",
            Self::Crossed => "12 3 2 3",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Solid => "solid",
            Self::Hatched => "hatched",
            Self::Dotted => "dotted",
            Self::Crossed => "crossed",
        }
    }
}

/// One named series of values, one per bucket.
pub(super) struct Series<'a> {
    pub(super) name: &'a str,
    pub(super) look: Look,
    pub(super) values: Vec<Option<f64>>,
}

/// The x axis: the buckets' first instants (ms) and a bucket's length.
pub(super) struct Axis {
    pub(super) starts: Vec<i64>,
    pub(super) step_ms: i64,
}

impl Axis {
    fn from(&self) -> i64 {
        self.starts.first().copied().unwrap_or(0)
    }

    fn to(&self) -> i64 {
        self.starts.last().copied().unwrap_or(0) + self.step_ms
    }

    fn x(&self, ms: i64) -> f64 {
        let span = (self.to() - self.from()).max(1) as f64;
        LEFT + (ms - self.from()) as f64 / span * (W - LEFT - RIGHT)
    }
}

/// `2026-12-04 13:05` (UTC) of an instant in ms.
fn when(ms: i64) -> String {
    let t = converger_core::time::ms_to_rfc3339(ms);
    t.get(..16).unwrap_or(&t).replacen('T', " ", 1)
}

fn defs(id: &str) -> Markup {
    let p = |look: Look, body: &str| {
        PreEscaped(format!(
            r##"<pattern id="{id}-{}" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#fff"/>{body}</pattern>"##,
            look.name()
        ))
    };
    html! {
        defs {
            (p(Look::Hatched, &format!(r#"<path d="M0,6 L6,0 M-1,1 L1,-1 M5,7 L7,5" stroke="{}" stroke-width="1.6"/>"#, Look::Hatched.colour())))
            (p(Look::Dotted, &format!(r#"<circle cx="3" cy="3" r="1.6" fill="{}"/>"#, Look::Dotted.colour())))
            (p(Look::Crossed, &format!(r#"<path d="M0,0 L6,6 M6,0 L0,6" stroke="{}" stroke-width="1.2"/>"#, Look::Crossed.colour())))
        }
    }
}

fn frame(id: &str, title: &str, desc: &str, body: Markup, legend: Markup) -> Markup {
    html! {
        figure.chart id=(id) {
            svg xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (W) " " (H) } width=(W) height=(H)
                role="img" aria-labelledby={ (id) "-title " (id) "-desc" } {
                title id={ (id) "-title" } { (title) }
                desc id={ (id) "-desc" } { (desc) }
                (defs(id))
                (body)
            }
            figcaption { strong { (title) } " " (legend) }
        }
    }
}

fn legend(id: &str, names: &[(&str, Look)], lines: bool) -> Markup {
    html! {
        @for (name, look) in names {
            span.legend {
                svg width="22" height="12" aria-hidden="true" {
                    @if lines {
                        line x1="1" y1="6" x2="21" y2="6" stroke=(look.colour()) stroke-width="2" stroke-dasharray=(look.dash()) {}
                    } @else {
                        rect x="1" y="1" width="20" height="10" fill=(look.fill(id)) stroke=(look.colour()) {}
                    }
                }
                " " (name)
            }
        }
    }
}

fn axes(axis: &Axis, max: f64, unit: &str) -> Markup {
    let base = H - BOTTOM;
    html! {
        line x1=(LEFT) y1=(base) x2={ (W - RIGHT) } y2=(base) stroke="#444" {}
        line x1=(LEFT) y1=(TOP) x2=(LEFT) y2=(base) stroke="#444" {}
        text x={ (LEFT - 4.0) } y={ (TOP + 8.0) } text-anchor="end" font-size="11" { (fmt(max)) }
        text x={ (LEFT - 4.0) } y=(base) text-anchor="end" font-size="11" { "0" }
        text x="4" y={ (TOP + (base - TOP) / 2.0) } font-size="11" { (unit) }
        text.from x=(LEFT) y={ (H - 10.0) } font-size="11" { (when(axis.from())) }
        text.to x={ (W - RIGHT) } y={ (H - 10.0) } text-anchor="end" font-size="11" { (when(axis.to())) " UTC" }
    }
}

fn fmt(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// A nice ceiling for an axis: 1, 2 or 5 times a power of ten, at least `v`.
fn ceiling(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|c| *c >= v)
        .unwrap_or(10.0 * p)
}

/// Stacked bars, one stack per bucket; the description gives each series' total.
pub(super) fn bars(id: &str, title: &str, unit: &str, axis: &Axis, series: &[Series]) -> Markup {
    let n = axis.starts.len();
    let totals: Vec<f64> = (0..n)
        .map(|i| {
            series
                .iter()
                .map(|s| s.values.get(i).copied().flatten().unwrap_or(0.0))
                .sum()
        })
        .collect();
    let max = ceiling(totals.iter().copied().fold(0.0, f64::max));
    let base = H - BOTTOM;
    let scale = (base - TOP) / max;
    let width = ((W - LEFT - RIGHT) / n.max(1) as f64 * 0.8).max(1.0);
    let desc = series
        .iter()
        .map(|s| {
            let t: f64 = s.values.iter().flatten().sum();
            format!("{}: {} in all", s.name, fmt(t))
        })
        .collect::<Vec<_>>()
        .join("; ");
    let desc = format!(
        "{desc}, from {} to {} UTC.",
        when(axis.from()),
        when(axis.to())
    );
    // Each bar's box, stacked from the axis up in the series' order.
    let mut boxes = Vec::new();
    for (i, at) in axis.starts.iter().enumerate() {
        let mut y = base;
        for s in series {
            let v = s.values.get(i).copied().flatten().unwrap_or(0.0);
            if v > 0.0 {
                let h = v * scale;
                y -= h;
                boxes.push((axis.x(*at), y, h, s, v, *at));
            }
        }
    }
    let body = html! {
        (axes(axis, max, unit))
        @for (x, y, h, s, v, at) in &boxes {
            rect class={ "bar " (s.look.name()) } x=(x) y=(y) width=(width) height=(h)
                fill=(s.look.fill(id)) stroke=(s.look.colour()) stroke-width="0.5" {
                title { (s.name) " " (fmt(*v)) " at " (when(*at)) }
            }
        }
    };
    let names: Vec<(&str, Look)> = series.iter().map(|s| (s.name, s.look)).collect();
    frame(id, title, &desc, body, legend(id, &names, false))
}

/// Lines, a point per bucket with a value (a gap where there is none).
pub(super) fn lines(id: &str, title: &str, unit: &str, axis: &Axis, series: &[Series]) -> Markup {
    let max = ceiling(
        series
            .iter()
            .flat_map(|s| s.values.iter().flatten().copied())
            .fold(0.0, f64::max),
    );
    let base = H - BOTTOM;
    let scale = (base - TOP) / max;
    let half = axis.x(axis.from() + axis.step_ms) - axis.x(axis.from());
    let desc = series
        .iter()
        .map(|s| {
            let seen: Vec<f64> = s.values.iter().flatten().copied().collect();
            match seen.iter().copied().reduce(f64::max) {
                Some(m) => format!("{}: highest {} {unit}", s.name, fmt(m)),
                None => format!("{}: no data", s.name),
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    let desc = format!(
        "{desc}, from {} to {} UTC.",
        when(axis.from()),
        when(axis.to())
    );
    let body = html! {
        (axes(axis, max, unit))
        @for s in series {
            @let points: Vec<String> = axis.starts.iter().zip(&s.values)
                .filter_map(|(at, v)| v.map(|v| format!("{:.1},{:.1}", axis.x(*at) + half / 2.0, base - v * scale)))
                .collect();
            polyline class={ "line " (s.look.name()) } points=(points.join(" ")) fill="none"
                stroke=(s.look.colour()) stroke-width="2" stroke-dasharray=(s.look.dash()) {}
            @for (at, v) in axis.starts.iter().zip(&s.values) {
                @if let Some(v) = v {
                    circle cx={ (axis.x(*at) + half / 2.0) } cy={ (base - v * scale) } r="2.5" fill=(s.look.colour()) {
                        title { (s.name) " " (fmt(*v)) " " (unit) " at " (when(*at)) }
                    }
                }
            }
        }
    };
    let names: Vec<(&str, Look)> = series.iter().map(|s| (s.name, s.look)).collect();
    frame(id, title, &desc, body, legend(id, &names, true))
}

/// A status over time: `(from ms, status)` changes, oldest first, each lasting to the next
/// (the last to the axis's end); `marks` are instants (ms) marked with a triangle and named.
pub(super) fn timeline(
    id: &str,
    title: &str,
    axis: &Axis,
    changes: &[(i64, &'static str)],
    looks: &[(&'static str, Look)],
    marks: &[(i64, &str)],
) -> Markup {
    let (top, bottom) = (TOP + 30.0, H - BOTTOM - 30.0);
    let look = |s: &str| {
        looks
            .iter()
            .find(|(n, _)| *n == s)
            .map_or(Look::Crossed, |(_, l)| *l)
    };
    let spans: Vec<(i64, i64, &str)> = changes
        .iter()
        .enumerate()
        .map(|(i, (from, s))| {
            let to = changes.get(i + 1).map_or(axis.to(), |(t, _)| *t);
            ((*from).max(axis.from()), to.min(axis.to()), *s)
        })
        .filter(|(from, to, _)| to > from)
        .collect();
    let desc = if spans.is_empty() {
        "No health checks in this range.".to_owned()
    } else {
        spans
            .iter()
            .map(|(f, t, s)| format!("{s} from {} to {}", when(*f), when(*t)))
            .chain(marks.iter().map(|(at, n)| format!("{n} at {}", when(*at))))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let body = html! {
        line x1=(LEFT) y1={ (H - BOTTOM) } x2={ (W - RIGHT) } y2={ (H - BOTTOM) } stroke="#444" {}
        text.from x=(LEFT) y={ (H - 10.0) } font-size="11" { (when(axis.from())) }
        text.to x={ (W - RIGHT) } y={ (H - 10.0) } text-anchor="end" font-size="11" { (when(axis.to())) " UTC" }
        @if spans.is_empty() {
            text x={ (W / 2.0) } y={ ((top + bottom) / 2.0) } text-anchor="middle" font-size="12" { "no health checks in this range" }
        }
        @for (from, to, s) in &spans {
            @let (x0, x1) = (axis.x(*from), axis.x(*to));
            rect class={ "span " (s) } x=(x0) y=(top) width={ ((x1 - x0).max(1.0)) } height={ (bottom - top) }
                fill=(look(s).fill(id)) stroke=(look(s).colour()) {
                title { (s) " from " (when(*from)) " to " (when(*to)) }
            }
            @if x1 - x0 > 70.0 {
                text x={ (x0 + 4.0) } y={ (top - 4.0) } font-size="11" { (s) }
            }
        }
        @for (at, name) in marks {
            @let x = axis.x(*at);
            path.mark d=(format!("M{x:.1},{:.1} l-6,-10 h12 z", H - BOTTOM - 2.0)) fill="#000" {
                title { (name) " at " (when(*at)) }
            }
        }
    };
    let mut names: Vec<(&str, Look)> = looks.to_vec();
    names.retain(|(n, _)| spans.iter().any(|(_, _, s)| s == n));
    let legend = html! {
        (legend(id, &names, false))
        @if !marks.is_empty() { span.legend { "▲ " (marks[0].1) } }
    };
    frame(id, title, &desc, body, legend)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis() -> Axis {
        Axis {
            starts: (0..4).map(|i| 1_764_806_400_000 + i * 3_600_000).collect(),
            step_ms: 3_600_000,
        }
    }

    #[test]
    fn bars_are_an_image_with_a_title_a_description_and_a_legend() {
        let svg = bars(
            "deliveries",
            "Deliveries per hour",
            "per hour",
            &axis(),
            &[
                Series {
                    name: "sent",
                    look: Look::Solid,
                    values: vec![Some(3.0), None, Some(1.0), Some(0.0)],
                },
                Series {
                    name: "dead letters",
                    look: Look::Dotted,
                    values: vec![Some(1.0), None, None, None],
                },
            ],
        )
        .into_string();
        assert!(svg.contains(r#"role="img""#), "{svg}");
        assert!(svg.contains("<title id=\"deliveries-title\">Deliveries per hour</title>"));
        assert!(svg.contains("sent: 4 in all; dead letters: 1 in all, from 2025-12-04 00:00"));
        assert_eq!(
            svg.matches("class=\"bar solid\"").count(),
            2,
            "no bar for 0 or none"
        );
        assert_eq!(svg.matches("class=\"bar dotted\"").count(), 1);
        assert!(
            svg.contains("url(#deliveries-dotted)"),
            "a pattern, not only a colour"
        );
        assert!(
            svg.contains("</svg> dead letters</span>"),
            "the legend names it"
        );
        assert!(!svg.contains("style="), "no style attribute (the CSP)");
    }

    #[test]
    fn lines_leave_gaps_and_the_timeline_names_its_spans_and_marks() {
        let svg = lines(
            "latency",
            "Ingest to sent",
            "ms",
            &axis(),
            &[Series {
                name: "p95",
                look: Look::Hatched,
                values: vec![Some(250.0), None, Some(1000.0), None],
            }],
        )
        .into_string();
        assert!(svg.contains("p95: highest 1000 ms"), "{svg}");
        assert_eq!(svg.matches(r#"r="2.5""#).count(), 2, "a point per value");
        assert!(svg.contains(r#"stroke-dasharray="8 4""#));
        let a = axis();
        let t = timeline(
            "health",
            "Health",
            &a,
            &[(a.starts[0] - 1000, "healthy"), (a.starts[2], "unhealthy")],
            &[("healthy", Look::Solid), ("unhealthy", Look::Dotted)],
            &[(a.starts[2] + 60_000, "breaker opened")],
        )
        .into_string();
        assert!(
            t.contains("healthy from 2025-12-04 00:00 to 2025-12-04 02:00; unhealthy from 2025-12-04 02:00 to 2025-12-04 04:00; breaker opened at 2025-12-04 02:01"),
            "{t}"
        );
        assert_eq!(t.matches("class=\"span ").count(), 2);
        assert_eq!(t.matches("class=\"mark\"").count(), 1);
        assert!(t.contains("▲ breaker opened"));
        let none = timeline("h", "Health", &a, &[], &[], &[]).into_string();
        assert!(none.contains("No health checks in this range."));
    }

    #[test]
    fn axis_ceilings_are_round() {
        assert_eq!(ceiling(0.0), 1.0);
        assert_eq!(ceiling(3.0), 5.0);
        assert_eq!(ceiling(7.0), 10.0);
        assert_eq!(ceiling(120.0), 200.0);
        assert_eq!(ceiling(1.0), 1.0);
    }
}

//! The sweep's results as text: the METG table and the queues variant's waits (Markdown), every
//! measured point (CSV), and
//! one plot per case (SVG, written by hand: efficiency against task granularity on a log
//! axis, one line per system, the 50 % threshold dashed).

use std::fmt::Write;

use crate::metg::{median_and_range, Metg, SweepPoint};
use crate::sweep::{CaseResult, SweepResult, SystemResult, THRESHOLD};

/// The summary: a row per case, a column per system, each cell the median METG over blocks in
/// microseconds and its range (`≤` where a block's sweep never fell below 50 %, `—` where no
/// block reached 50 %, `refused` where the system cannot run the case).
pub fn metg_summary(result: &SweepResult) -> String {
    let Some(first) = result.cases.first() else { return String::new() };
    let mut table = String::from("| pattern | width |");
    let mut rule = String::from("| --- | ---: |");
    for system in &first.systems {
        let _ = write!(table, " {} |", system.system);
        rule.push_str(" ---: |");
    }
    let _ = writeln!(table, "\n{rule}");
    for case in &result.cases {
        let _ = write!(table, "| {} | {} |", case.pattern, case.width);
        for system in &case.systems {
            let cell =
                if system.refused.is_some() { "refused".to_owned() } else { summary_cell(system) };
            let _ = write!(table, " {cell} |");
        }
        table.push('\n');
    }
    table
}

/// One system's median METG in microseconds with its range over blocks.
fn summary_cell(system: &SystemResult) -> String {
    let metgs = system.metgs();
    let bounded = metgs.iter().any(|metg| matches!(metg, Metg::AtMost(_)));
    let mut nanoseconds: Vec<f64> = metgs.iter().filter_map(|metg| metg.nanoseconds()).collect();
    match median_and_range(&mut nanoseconds) {
        Some((median, min, max)) => {
            let at_most = if bounded { "≤ " } else { "" };
            format!("{at_most}{:.2} ({:.2}–{:.2})", median / 1e3, min / 1e3, max / 1e3)
        }
        None => "—".to_owned(),
    }
}

/// The METG table: a row per case and system with the median METG over blocks, its range, and
/// how many blocks reached 50 % at all.
pub fn metg_table(result: &SweepResult) -> String {
    let mut table = String::from(
        "| pattern | width | system | METG(50 %) median | min – max | blocks |\n\
         | --- | ---: | --- | ---: | ---: | ---: |\n",
    );
    for case in &result.cases {
        for system in &case.systems {
            let cells = match &system.refused {
                Some(reason) => format!("refused: {reason} | | "),
                None => metg_cells(system),
            };
            let _ = writeln!(
                table,
                "| {} | {} | {} | {cells} |",
                case.pattern, case.width, system.system
            );
        }
    }
    table
}

/// The median, range and block count of one system's METGs.
fn metg_cells(system: &SystemResult) -> String {
    let metgs = system.metgs();
    let bounded = metgs.iter().any(|metg| matches!(metg, Metg::AtMost(_)));
    let mut nanoseconds: Vec<f64> = metgs.iter().filter_map(|metg| metg.nanoseconds()).collect();
    let reached = nanoseconds.len();
    match median_and_range(&mut nanoseconds) {
        Some((median, min, max)) => {
            let at_most = if bounded { "≤ " } else { "" };
            format!(
                "{at_most}{} | {} – {} | {reached}/{}",
                microseconds(median),
                microseconds(min),
                microseconds(max),
                metgs.len()
            )
        }
        None => format!("not reached | | 0/{}", metgs.len()),
    }
}

fn microseconds(nanoseconds: f64) -> String {
    format!("{:.2} µs", nanoseconds / 1e3)
}

/// The queues variant's waits per case: issued, and how the device resolved them.
pub fn waits_table(result: &SweepResult) -> String {
    let mut table = String::from(
        "| pattern | width | issued | elided | satisfied | device | held |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for case in &result.cases {
        for waits in case.systems.iter().filter_map(|system| system.waits) {
            let r = waits.resolutions;
            let _ = writeln!(
                table,
                "| {} | {} | {} | {} | {} | {} | {} |",
                case.pattern, case.width, waits.issued, r.elided, r.satisfied, r.device, r.held
            );
        }
    }
    table
}

/// Every measured point, one line each: `pattern,width,system,block,iterations,tasks,granularity_ns,efficiency`.
pub fn points_csv(result: &SweepResult) -> String {
    let mut csv =
        String::from("pattern,width,system,block,iterations,tasks,granularity_ns,efficiency\n");
    for case in &result.cases {
        for system in &case.systems {
            for (block, sweep) in system.sweeps.iter().enumerate() {
                for point in sweep {
                    let _ = writeln!(
                        csv,
                        "{},{},{},{block},{},{},{:.1},{:.4}",
                        case.pattern,
                        case.width,
                        system.system,
                        point.iterations,
                        point.tasks,
                        point.granularity_ns,
                        point.efficiency
                    );
                }
            }
        }
    }
    csv
}

/// Per iteration count, the median granularity and efficiency over blocks: the line plotted.
fn median_line(system: &SystemResult) -> Vec<(f64, f64)> {
    let Some(first) = system.sweeps.first() else { return Vec::new() };
    (0..first.len())
        .filter_map(|index| {
            let points: Vec<SweepPoint> =
                system.sweeps.iter().filter_map(|sweep| sweep.get(index).copied()).collect();
            let mut granularity: Vec<f64> = points.iter().map(|p| p.granularity_ns).collect();
            let mut efficiency: Vec<f64> = points.iter().map(|p| p.efficiency).collect();
            Some((median_and_range(&mut granularity)?.0, median_and_range(&mut efficiency)?.0))
        })
        .collect()
}

/// Line colours, one per system in table order: ten, so that the harness's six systems and
/// the three outside peers each get their own.
const COLOURS: [&str; 10] = [
    "#d62728", "#ff7f0e", "#1f77b4", "#2ca02c", "#7f7f7f", "#9467bd", "#8c564b", "#17becf",
    "#e377c2", "#bcbd22",
];

/// The plot of one case: efficiency (0 to 110 %) against task granularity (log scale).
pub fn case_svg(case: &CaseResult) -> String {
    const WIDTH: f64 = 680.0;
    const HEIGHT: f64 = 400.0;
    const LEFT: f64 = 60.0;
    const RIGHT: f64 = 160.0;
    const TOP: f64 = 30.0;
    const BOTTOM: f64 = 50.0;
    const TOP_EFFICIENCY: f64 = 1.1;
    let lines: Vec<(&SystemResult, Vec<(f64, f64)>)> =
        case.systems.iter().map(|system| (system, median_line(system))).collect();
    let granularities = lines.iter().flat_map(|(_, line)| line.iter().map(|&(g, _)| g));
    let (low, high) = granularities
        .filter(|g| *g > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(low, high), g| (low.min(g), high.max(g)));
    let (decade_low, decade_high) = if low.is_finite() {
        (low.log10().floor(), high.log10().ceil().max(low.log10().floor() + 1.0))
    } else {
        (2.0, 6.0)
    };
    let x = |g: f64| {
        LEFT + (g.log10() - decade_low) / (decade_high - decade_low) * (WIDTH - LEFT - RIGHT)
    };
    let y = |e: f64| TOP + (1.0 - e.min(TOP_EFFICIENCY) / TOP_EFFICIENCY) * (HEIGHT - TOP - BOTTOM);

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="18" text-anchor="middle" font-size="14">{} — width {}</text>"#,
        (LEFT + WIDTH - RIGHT) / 2.0,
        case.pattern,
        case.width
    );
    // Axes, gridlines and ticks: a decade per x tick, 10 % per y tick.
    let (x0, x1, y0, y1) = (LEFT, WIDTH - RIGHT, y(0.0), y(TOP_EFFICIENCY));
    for tenth in 0..=11 {
        let e = f64::from(tenth) / 10.0;
        let _ = writeln!(
            svg,
            r##"<line x1="{x0}" y1="{0:.1}" x2="{x1}" y2="{0:.1}" stroke="#eee"/><text x="{1}" y="{2:.1}" text-anchor="end">{3}%</text>"##,
            y(e),
            x0 - 5.0,
            y(e) + 4.0,
            tenth * 10
        );
    }
    let mut decade = decade_low;
    while decade <= decade_high {
        let g = 10f64.powf(decade);
        let label = if decade >= 3.0 {
            format!("{} µs", 10f64.powf(decade - 3.0))
        } else {
            format!("{g} ns")
        };
        let _ = writeln!(
            svg,
            r##"<line x1="{0:.1}" y1="{y1:.1}" x2="{0:.1}" y2="{y0:.1}" stroke="#eee"/><text x="{0:.1}" y="{1:.1}" text-anchor="middle">{label}</text>"##,
            x(g),
            y0 + 16.0
        );
        decade += 1.0;
    }
    // The axes over the gridlines.
    let _ = writeln!(
        svg,
        r#"<path d="M{x0},{y1:.1} L{x0},{y0:.1} L{x1},{y0:.1}" fill="none" stroke="black"/>"#
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">task granularity (core time per task, log scale)</text>"#,
        (x0 + x1) / 2.0,
        HEIGHT - 10.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="14" y="{}" text-anchor="middle" transform="rotate(-90 14 {})">efficiency</text>"#,
        (y0 + y1) / 2.0,
        (y0 + y1) / 2.0
    );
    let _ = writeln!(
        svg,
        r#"<line x1="{x0}" y1="{0:.1}" x2="{x1}" y2="{0:.1}" stroke="black" stroke-dasharray="4 4"/>"#,
        y(THRESHOLD)
    );
    for (index, (system, line)) in lines.iter().enumerate() {
        let colour = COLOURS[index % COLOURS.len()];
        let legend_y = TOP + 18.0 * index as f64;
        let _ = writeln!(
            svg,
            r#"<line x1="{0}" y1="{legend_y}" x2="{1}" y2="{legend_y}" stroke="{colour}" stroke-width="2"/><text x="{2}" y="{3}">{4}</text>"#,
            x1 + 10.0,
            x1 + 30.0,
            x1 + 35.0,
            legend_y + 4.0,
            system.system
        );
        if line.is_empty() {
            continue;
        }
        let points: Vec<String> =
            line.iter().map(|&(g, e)| format!("{:.1},{:.1}", x(g), y(e))).collect();
        let _ = writeln!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#,
            points.join(" ")
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::COLOURS;
    use crate::systems::outside::OutsideKind;
    use crate::systems::System;

    #[test]
    fn every_system_and_outside_peer_gets_a_colour_of_its_own() {
        // A plot has a line per system that ran: the harness's own and every outside peer.
        let lines = System::ALL.len() + OutsideKind::ALL.len();
        assert!(COLOURS.len() >= lines, "{} colours for {lines} lines", COLOURS.len());
        for (index, colour) in COLOURS.iter().enumerate() {
            assert!(!COLOURS[..index].contains(colour), "{colour} twice");
        }
    }
}

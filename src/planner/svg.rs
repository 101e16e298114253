//! SVG rendering of a plan: op step across, byte offset up.

use super::{BufferRequirement, Plan};
use core::fmt::Write;
use rust_alloc::string::String;

pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 allows no control characters but tab, newline and carriage return, not
            // even as character references, nor U+FFFE / U+FFFF: write them as `\u{..}` text.
            '\t' | '\n' | '\r' => out.push(c),
            c if c.is_control() || c == '\u{FFFE}' || c == '\u{FFFF}' => {
                out.extend(c.escape_unicode())
            }
            c => out.push(c),
        }
    }
    out
}

fn human(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{:.2} MiB", bytes as f64 / (1u64 << 20) as f64)
    } else if bytes >= 1 << 10 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

pub(crate) fn render(plan: &Plan, buffers: &[BufferRequirement]) -> String {
    const W: f64 = 1000.0;
    const H: f64 = 600.0;
    const LEFT: f64 = 90.0;
    const TOP: f64 = 40.0;
    const BOTTOM: f64 = 40.0;
    const RIGHT: f64 = 20.0;
    let min_step = buffers.iter().map(|b| b.first_use).min().unwrap_or(0);
    let max_step = buffers.iter().map(|b| b.last_use).max().unwrap_or(0);
    // In f64 and saturating: steps come from user records and may reach `usize::MAX`, and a
    // buffer given here need not have been validated (first ≤ last).
    let steps = max_step.saturating_sub(min_step) as f64 + 1.0;
    let top_bytes = plan.arena_size.max(plan.lower_bound).max(1) as f64;
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let x = |step: f64| LEFT + (step - min_step as f64) / steps * pw;
    let y = |bytes: usize| TOP + ph - bytes as f64 / top_bytes * ph;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        s,
        r#"<rect x="0" y="0" width="{W}" height="{H}" fill="white"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="20">planner {}: arena {} bytes ({}), lower bound {} bytes, ratio {:.4}, {} buffers</text>"#,
        escape(&plan.planner),
        plan.arena_size,
        human(plan.arena_size),
        plan.lower_bound,
        plan.ratio(),
        buffers.len()
    );
    // Axes.
    let _ = writeln!(
        s,
        r#"<line x1="{LEFT}" y1="{}" x2="{}" y2="{}" stroke="black"/><line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{}" stroke="black"/>"#,
        TOP + ph,
        LEFT + pw,
        TOP + ph,
        TOP + ph
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">op step ({min_step}..={max_step})</text>"#,
        LEFT + pw / 2.0,
        H - 10.0
    );
    for k in 0..=4 {
        let b = (top_bytes * k as f64 / 4.0) as usize;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            y(b) + 4.0,
            human(b)
        );
    }
    // Buffers. Thin outlines only when there are few, so 1,000 buffers stay readable.
    let stroke = if buffers.len() <= 200 {
        r#" stroke="black" stroke-width="0.5""#
    } else {
        ""
    };
    for (i, (b, &off)) in buffers.iter().zip(&plan.offsets).enumerate() {
        let padded = b.padded_size().unwrap_or(b.size);
        let (x0, x1) = (x(b.first_use as f64), x(b.last_use as f64 + 1.0));
        let (y1, y0) = (y(off), y(off.saturating_add(padded)));
        let hue = (i as u64).wrapping_mul(137) % 360;
        let name = b
            .name
            .as_deref()
            .map(escape)
            .unwrap_or_else(|| format!("buffer {i}"));
        let _ = writeln!(
            s,
            r#"<rect x="{x0:.2}" y="{y0:.2}" width="{:.2}" height="{:.2}" fill="hsl({hue},60%,65%)" fill-opacity="0.85"{stroke}><title>{name} (#{i}): {} bytes at offset {off}, steps {}..={}</title></rect>"#,
            (x1 - x0).max(0.5),
            (y1 - y0).max(0.5),
            b.size,
            b.first_use,
            b.last_use
        );
    }
    // Lower bound and arena size.
    let lb = y(plan.lower_bound);
    let _ = writeln!(
        s,
        r#"<line x1="{LEFT}" y1="{lb:.2}" x2="{}" y2="{lb:.2}" stroke="red" stroke-dasharray="6,4"/><text x="{}" y="{:.2}" fill="red" text-anchor="end">lower bound {}</text>"#,
        LEFT + pw,
        LEFT + pw,
        lb - 4.0,
        plan.lower_bound
    );
    let ar = y(plan.arena_size);
    let _ = writeln!(
        s,
        r#"<line x1="{LEFT}" y1="{ar:.2}" x2="{}" y2="{ar:.2}" stroke="black"/><text x="{}" y="{:.2}" text-anchor="start">arena {}</text>"#,
        LEFT + pw,
        LEFT + 4.0,
        ar - 4.0,
        plan.arena_size
    );
    s.push_str("</svg>\n");
    s
}

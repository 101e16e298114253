//! Reports of a partition: text, JSON and an SVG drawing coloured by device.

use super::{Partition, PartitionGraph};
use core::fmt::Write;
use rust_alloc::{string::String, string::ToString};

/// Colours of devices in drawings, by device index.
const COLOURS: &[&str] = &[
    "#8ecae6", "#ffb703", "#90be6d", "#f28482", "#cdb4db", "#adb5bd",
];

impl Partition {
    /// Text report: each subgraph (device, ops, inputs, outputs, wait count), the copies, and
    /// why each op went where it went.
    pub fn to_text(&self, graph: &PartitionGraph) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "policy {}: {} subgraph(s), {} copy step(s), {} B copied per invoke",
            self.policy,
            self.subgraphs.len(),
            self.copies.len(),
            self.bytes_copied_per_invoke
        );
        for s in &self.subgraphs {
            let _ = writeln!(
                o,
                "subgraph {} on {}: {} op(s) {:?}\n  inputs {:?}  outputs {:?}  wait_count {}",
                s.index,
                s.device_name,
                s.nodes.len(),
                s.nodes,
                s.inputs,
                s.outputs,
                s.wait_count
            );
        }
        if !self.copies.is_empty() {
            o.push_str("copies per invoke:\n");
        }
        for c in &self.copies {
            let when = c.after.map_or("at invoke start".to_string(), |a| {
                format!("after subgraph {a}")
            });
            let name = graph.tensors.get(c.tensor).map_or("", |t| t.name.as_str());
            let _ = writeln!(
                o,
                "  tensor {} `{name}` {} -> {}: {} B, {when}",
                c.tensor, c.from, c.to, c.bytes
            );
        }
        if !self.build_time_nodes.is_empty() {
            let _ = writeln!(
                o,
                "ops run once at build (constant inputs): {:?}",
                self.build_time_nodes
            );
        }
        o.push_str("decisions:\n");
        for d in &self.decisions {
            let _ = writeln!(o, "  op {:>4} {:<24} {}", d.node, d.op, d.reason);
        }
        o
    }

    /// The JSON report: `subgraphs` [{`index`, `device`, `nodes`, `inputs`, `outputs`,
    /// `wait_count`}], `copies` [{`tensor`, `from`, `to`, `bytes`, `after`}],
    /// `bytes_copied_per_invoke`, `decisions` and `build_time_nodes`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// An SVG of the ops in model order, one row each, coloured by device, with each subgraph's
    /// index and a legend.
    pub fn to_svg(&self, graph: &PartitionGraph, device_names: &[&str]) -> String {
        let row = 18;
        let mut sub_of = std::collections::HashMap::new();
        for s in &self.subgraphs {
            for &n in &s.nodes {
                sub_of.insert(n, (s.index, s.device));
            }
        }
        let height = (graph.nodes.len() + device_names.len() + 2) * row;
        let mut o = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"520\" height=\"{height}\" font-family=\"monospace\" font-size=\"12\">\n"
        );
        for (i, node) in graph.nodes.iter().enumerate() {
            let (s, d) = sub_of.get(&node.index).copied().unwrap_or((0, 0));
            let y = i * row;
            let _ = writeln!(
                o,
                "<rect x=\"0\" y=\"{y}\" width=\"500\" height=\"{}\" fill=\"{}\"/><text x=\"4\" y=\"{}\">op {} {} · subgraph {s}</text>",
                row - 2,
                COLOURS[d % COLOURS.len()],
                y + 12,
                node.index,
                xml_escape(&node.op)
            );
        }
        for (d, name) in device_names.iter().enumerate() {
            let y = (graph.nodes.len() + 1 + d) * row;
            let _ = writeln!(
                o,
                "<rect x=\"0\" y=\"{y}\" width=\"14\" height=\"14\" fill=\"{}\"/><text x=\"20\" y=\"{}\">{}</text>",
                COLOURS[d % COLOURS.len()],
                y + 12,
                xml_escape(name)
            );
        }
        o.push_str("</svg>\n");
        o
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

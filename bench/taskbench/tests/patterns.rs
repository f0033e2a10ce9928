//! Each pattern's dependency lists against a brute-force model: for every candidate column,
//! does the paper's definition (as the `pattern` module states it) make it a dependency?

use causeway_taskbench::graph::TaskGraph;
use causeway_taskbench::pattern::Pattern;
use proptest::prelude::*;

/// ⌈log₂ width⌉, at least 1, counted the slow way.
fn stages(width: u32) -> u32 {
    let mut stages = 1;
    while (1u64 << stages) < u64::from(width) {
        stages += 1;
    }
    stages
}

/// Whether column `point` holds a task at `step`, straight from the definition.
fn model_active(pattern: Pattern, step: u32, point: u32, width: u32) -> bool {
    match pattern {
        Pattern::Tree => {
            let phase = step % (stages(width) + 1);
            u64::from(point) < 2u64.pow(phase).min(u64::from(width))
        }
        _ => point < width,
    }
}

/// Whether task `(step, point)` depends on `(step − 1, column)`, straight from the definition.
fn model_depends(pattern: Pattern, step: u32, point: u32, column: u32, width: u32) -> bool {
    if step == 0 || !model_active(pattern, step, point, width) {
        return false;
    }
    let (i, j) = (i64::from(point), i64::from(column));
    match pattern {
        Pattern::Trivial => false,
        Pattern::NoComm => i == j,
        Pattern::Stencil1d => (i - j).abs() <= 1,
        Pattern::Fft => {
            let distance = 1i64 << ((step - 1) % stages(width));
            j == i || j == i ^ distance
        }
        Pattern::Tree => {
            let phase = step % (stages(width) + 1);
            if phase == 0 {
                j == 0
            } else {
                j == i / 2
            }
        }
        Pattern::Nearest { radix } => {
            let radix = i64::from(radix);
            j - i >= -((radix - 1) / 2) && j - i <= radix / 2
        }
        Pattern::Spread { radix } => {
            let stride = (width / radix).max(1);
            (0..radix.min(width)).any(|k| (point + k * stride) % width == column)
        }
        Pattern::AllToAll => true,
        _ => unreachable!("a pattern this test does not model"),
    }
}

fn patterns_with_radix(radix: u32) -> Vec<Pattern> {
    let mut patterns = Pattern::STANDARD.to_vec();
    patterns.push(Pattern::Nearest { radix });
    patterns.push(Pattern::Spread { radix });
    patterns
}

fn check(pattern: Pattern, width: u32, step: u32, point: u32) {
    let mut found = Vec::new();
    pattern.dependencies(step, point, width, &mut found);
    let expected: Vec<u32> =
        (0..width).filter(|&column| model_depends(pattern, step, point, column, width)).collect();
    assert_eq!(found, expected, "{pattern} width {width}: task ({step}, {point})");
    assert_eq!(pattern.is_active(step, point, width), model_active(pattern, step, point, width));
    // A dependency is always a task of the step before.
    for &column in &found {
        assert!(model_active(pattern, step - 1, column, width), "{pattern}: ({step}, {point})");
    }
}

#[test]
fn every_pattern_matches_the_model_for_widths_1_to_20() {
    for width in 1..=20 {
        for radix in 1..=7 {
            for pattern in patterns_with_radix(radix) {
                for step in 0..3 * (stages(width) + 1) {
                    for point in 0..width {
                        check(pattern, width, step, point);
                    }
                }
            }
        }
    }
}

#[test]
fn the_graph_holds_the_patterns_dependencies_and_counts_its_tasks() {
    let graph = TaskGraph::new(Pattern::Tree, 8, 9).expect("a valid graph");
    // Phases 0..=3 hold 1, 2, 4 and 8 tasks; steps 0..9 are two trees and a root.
    assert_eq!(graph.tasks(), 2 * (1 + 2 + 4 + 8) + 1);
    assert_eq!(graph.dependencies(4, 0), &[0]);
    assert_eq!(graph.dependencies(5, 1), &[0]);
    assert_eq!(graph.max_dependencies(), 1);
    let stencil = TaskGraph::new(Pattern::Stencil1d, 4, 3).expect("a valid graph");
    assert_eq!(stencil.dependencies(0, 1), &[] as &[u32]);
    assert_eq!(stencil.dependencies(1, 0), &[0, 1]);
    assert_eq!(stencil.dependencies(2, 2), &[1, 2, 3]);
    let broken = stencil.without_first_dependency(2, 2);
    assert_eq!(broken.dependencies(2, 2), &[2, 3]);
    assert_eq!(broken.dependencies(2, 3), &[2, 3]);
}

#[test]
fn names_round_trip() {
    for pattern in patterns_with_radix(7) {
        assert_eq!(pattern.to_string().parse::<Pattern>(), Ok(pattern));
    }
}

proptest! {
    #[test]
    fn random_tasks_match_the_model(
        width in 1u32..200,
        radix in 1u32..12,
        step in 0u32..64,
        point_seed in any::<u32>(),
    ) {
        let point = point_seed % width;
        for pattern in patterns_with_radix(radix) {
            check(pattern, width, step, point);
        }
    }
}

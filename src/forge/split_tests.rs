use proptest::prelude::*;

use super::*;

/// Whether `body` renders on its own: every fence closed, `<details>` never closed before it
/// is opened and all closed, counted outside fences. Written apart from the splitter's scanner.
fn balanced(body: &str) -> bool {
    let (mut fence, mut depth): (Option<(char, usize)>, i64) = (None, 0);
    for line in body.lines() {
        let trimmed = line.trim_start_matches(' ');
        let indent = line.len() - trimmed.len();
        let first = trimmed.chars().next().filter(|c| indent <= 3 && (*c == '`' || *c == '~'));
        let run = first.map_or(0, |c| trimmed.chars().take_while(|x| *x == c).count());
        match (fence, first) {
            (Some((c, len)), Some(f)) if f == c && run >= len && trimmed[run..].trim().is_empty() => fence = None,
            (Some(_), _) => {}
            (None, Some(f)) if run >= 3 => fence = Some((f, run)),
            (None, _) => {
                depth += line.matches("<details>").count() as i64 + line.matches("<details ").count() as i64;
                depth -= line.matches("</details>").count() as i64;
                if depth < 0 {
                    return false;
                }
            }
        }
    }
    fence.is_none() && depth == 0
}

/// Markdown as a report holds it: text, fenced code (with what looks like tags inside), and
/// `<details>` blocks with a summary, nested.
fn markdown() -> impl Strategy<Value = Vec<String>> {
    let text = prop_oneof![
        "[a-z0-9é ]{0,120}".prop_map(|s| vec![s]),
        "[a-z ]{300,700}".prop_map(|s| vec![s]),
        Just(vec![String::new()]),
    ];
    text.prop_recursive(3, 400, 30, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..30).prop_map(|v| v.concat()),
            (prop::collection::vec("[a-z<>/ ]{0,80}", 0..40), prop::bool::ANY).prop_map(|(lines, tilde)| {
                let (open, close) = if tilde { ("~~~~ diff", "~~~~") } else { ("```yaml", "```") };
                let mut out = vec![open.to_owned()];
                out.extend(lines.into_iter().map(|l| l.replace("```", "")));
                out.push(close.to_owned());
                out
            }),
            (prop::collection::vec(inner, 0..20), "[a-z ]{1,40}", prop::bool::ANY).prop_map(|(body, title, open)| {
                let tag = if open { "<details open>" } else { "<details>" };
                let mut out = vec![tag.to_owned(), format!("<summary>{title}</summary>"), String::new()];
                out.extend(body.concat());
                out.push("</details>".to_owned());
                out
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn parts_fit_render_alone_and_carry_the_whole_input(
        blocks in prop::collection::vec(markdown(), 1..8),
        limit in 700usize..3000,
        trailing in prop::bool::ANY,
    ) {
        let mut input = format!("{MARKER}\n{}", blocks.concat().join("\n"));
        if trailing {
            input.push('\n');
        }
        prop_assert!(balanced(&input), "the generator makes balanced Markdown");
        let parts = split(&input, limit);
        let count = parts.len();
        let mut carried = String::new();
        for (i, part) in parts.iter().enumerate() {
            let body = part.render(i + 1, count);
            prop_assert!(body.len() <= limit, "part {} is {} bytes over {limit}", i + 1, body.len());
            prop_assert!(balanced(&body), "part {}/{count} is unbalanced:\n{body}", i + 1);
            let marker = part_marker(i + 1, count);
            let head = format!("{marker}\n");
            prop_assert!(body.starts_with(&head));
            carried.push_str(&part.content);
        }
        prop_assert_eq!(carried, input.clone());
        let bodies = split_bodies(&input, limit);
        prop_assert!(bodies.iter().all(|b| b.len() <= limit && b.starts_with(MARKER_PREFIX)));
        prop_assert_eq!(bodies.len() == 1, input.len() <= limit);
    }
}

#[test]
fn a_report_that_fits_is_one_body_unchanged() {
    let report = format!("{MARKER}\n# Preview\n\nno changes\n");
    assert_eq!(split_bodies(&report, 65_536), [report]);
}

#[test]
fn a_fence_and_details_open_at_a_cut_close_and_reopen_with_their_summary() {
    let mut report = format!("{MARKER}\n<details open>\n<summary>unit shop: 3 changed</summary>\n\n```diff\n");
    for i in 0..40 {
        report.push_str(&format!("+  replicas: {i}\n"));
    }
    report.push_str("```\n</details>\n");
    let parts = split(&report, 400);
    assert!(parts.len() > 1, "{parts:?}");
    let second = parts[1].render(2, parts.len());
    assert!(
        second.starts_with(&format!(
            "{}\n<details open>\n<summary>unit shop: 3 changed</summary>\n\n```diff\n+  replicas:",
            part_marker(2, parts.len())
        )),
        "{second}"
    );
    assert!(parts[0].render(1, parts.len()).ends_with("\n```\n</details>\n"));
    assert!(parts.iter().enumerate().all(|(i, p)| balanced(&p.render(i + 1, parts.len()))));
}

#[test]
fn a_line_longer_than_a_part_is_cut_not_dropped() {
    let line = "é".repeat(1000);
    let report = format!("{MARKER}\n{line}\n");
    let parts = split(&report, 500);
    assert!(parts.iter().enumerate().all(|(i, p)| p.render(i + 1, parts.len()).len() <= 500));
    assert_eq!(parts.iter().map(|p| p.content.as_str()).collect::<String>(), report);
}

#[test]
fn tags_inside_a_fence_are_code_not_blocks() {
    let mut stack = Vec::new();
    for line in ["```html\n", "<details>\n", "```\n"] {
        step(&mut stack, line);
    }
    assert!(stack.is_empty(), "{stack:?}");
    step(&mut stack, "<details><summary>a</summary>\n");
    assert!(matches!(&stack[..], [Open::Details { summary: None, expect_summary: false, .. }]));
    step(&mut stack, "</details>\n");
    assert!(stack.is_empty());
    for line in ["<details>\n", "```\n", "```\n", "<summary>not this block's</summary>\n"] {
        step(&mut stack, line);
    }
    assert!(matches!(&stack[..], [Open::Details { summary: None, .. }]), "{stack:?}");
}

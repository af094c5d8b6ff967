//! docs/capi.md's complete example compiles against `gpol.h` and libgpol, runs, and
//! prints what the page says it prints. Skipped, saying so, where there is no C compiler.

mod support;

/// The fenced block of `lang` that comes first after `after` in `text`.
fn block<'a>(text: &'a str, after: &str, lang: &str) -> &'a str {
    let from = text.find(after).unwrap_or_else(|| panic!("docs/capi.md has no `{after}`"));
    let fence = format!("```{lang}\n");
    let start = text[from..].find(&fence).map(|i| from + i + fence.len()).expect("a fenced block");
    let end = text[start..].find("```").map(|i| start + i).expect("the block's end");
    &text[start..end]
}

#[test]
fn the_example_in_docs_capi_md_compiles_runs_and_prints_what_it_says() {
    let Some(cc) = support::cc() else { return };
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/capi.md")).expect("docs/capi.md");
    let source = block(&page, "## A complete example", "c");
    let prints = block(&page, "It prints:", "text");
    let dir = support::Scratch::new("docs");
    let exe = support::build_c(&cc, &dir.0, source, &[]);
    assert_eq!(support::run(&exe), prints);
}

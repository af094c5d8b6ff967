fn main() {
    let path = std::env::args().nth(1).expect("path");
    let text = std::fs::read_to_string(&path).expect("read");
    match gpol_compiler::parse::parse(Default::default(), &text) {
        Ok(f) => println!("{:#?}", f.items.len()),
        Err(d) => {
            let mut sm = gpol_compiler::source::SourceMap::new();
            sm.add(gpol_compiler::source::SourceFile::new(path, text));
            print!("{}", gpol_compiler::diag::render::human(&sm, &d, false));
        }
    }
}

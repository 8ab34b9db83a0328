use tickscope::scope;

fn main() {
    let name = String::from("parse");
    let items = vec![1, 2, 3];
    struct Opaque;
    let _a = scope!(name);
    let _b = scope!();
    let _c = scope!(42, x = 1);
    let _d = scope!("v", items = items);
    let _e = scope!("v", o = Opaque);
}

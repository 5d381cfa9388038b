//! Linux: link the NIF library `-z nodelete`, so that the dynamic loader never
//! unmaps it, even when the VM unloads it after a purge (see src/init.rs): the
//! threads of its rayon pool and the values of its statics outlive any one load.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    }
    println!("cargo:rerun-if-changed=build.rs");
}

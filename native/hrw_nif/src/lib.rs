//! Erlang NIF glue for `hrw_core`: the only place that turns terms into ids.
//!
//! Each NIF that can be handed large input exists twice: a normal-scheduler version
//! that works within a budget and raises `:hrw_needs_dirty` when it would exceed it,
//! and a `_dirty` twin on a dirty CPU scheduler. `lib/hrw/native.ex` documents the
//! protocol on the Elixir side.

mod batch;
mod bounded;
mod failure;
mod list;
mod nodeset;
mod resource;
mod ring;
mod skeleton;
mod term_id;
mod tuple_view;
mod weighted;

rustler::init!("Elixir.HRW.Native", load = load);

fn load(env: rustler::Env, _info: rustler::Term) -> bool {
    resource::open::<ring::RingResource>(env) && resource::open::<skeleton::SkeletonResource>(env)
}

/// Rust allocations of the NIF (term walks, node lists, batches) come from the VM's
/// allocator, which keeps freed carriers for reuse: with the system allocator every
/// build of thousands of nodes mapped fresh pages for its buffers and faulted them
/// in (about half of a 10k-node build's time went to the kernel).
#[global_allocator]
static ALLOCATOR: rustler::EnifAllocator = rustler::EnifAllocator;

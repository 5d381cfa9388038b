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

defmodule HRW.NativeProbe do
  @moduledoc false
  # The test builds' twins of the NIFs (native/hrw_nif/src/nif.rs: the cargo
  # feature `work-probes`, on in MIX_ENV=test only), for test/hrw/budget_test.exs
  # and term_id_test.exs. A production build of the library has none: they are
  # reached with `apply/3` here, so that the tests also compile against such a
  # build (the prod legs of scripts/test-matrix).

  @doc """
  Runs the normal-scheduler version of the NIF `name` on `args` and returns
  `{outcome, charged, counted}` (outcome `:ok`, `:needs_dirty`, `{:bad_arg, msg}`
  or `:stale_resource`), the work units it charged to its budget and those it
  counted. Test builds only.
  """
  @spec probe(atom(), [term()]) :: {term(), non_neg_integer(), non_neg_integer()}
  def probe(name, args), do: apply(HRW.Native, :"#{name}_probe", args)

  @doc """
  The id of `term` from the walk without a budget, run on a dirty scheduler from
  the start (`term_id_dirty`). A production build has no such twin: there the
  id is `HRW.term_id/1`'s, so a test that compares the two checks the normal
  walk only.
  """
  @spec dirty_term_id(term()) :: non_neg_integer()
  def dirty_term_id(term) do
    if HRW.TestBuild.without_work_probes(),
      do: HRW.term_id(term),
      else: apply(HRW.Native, :term_id_dirty, [term])
  end

  @doc "The calls that ran on a dirty scheduler so far, all NIFs together (test builds only)."
  @spec dirty_runs() :: non_neg_integer()
  def dirty_runs, do: apply(HRW.Native, :dirty_runs, [])
end

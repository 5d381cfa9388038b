defmodule HRW.NativeProbe do
  @moduledoc false
  # The work probes of the NIFs (`name_probe` in `HRW.Native`, declared in every
  # build, counting work only in test builds: the `work-probes` feature), for
  # test/hrw/budget_test.exs and term_id_test.exs.

  @doc """
  Runs the normal-scheduler version of the NIF `name` on `args` and returns
  `{outcome, charged, counted}` (outcome `:ok`, `:needs_dirty`, `{:bad_arg, msg}`
  or `:stale_resource`), the work units it charged to its budget and those it
  counted (0 unless built for tests).
  """
  @spec probe(atom(), [term()]) :: {term(), non_neg_integer(), non_neg_integer()}
  def probe(name, args), do: apply(HRW.Native, :"#{name}_probe", args)
end

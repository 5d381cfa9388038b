defmodule HRW.ClusterPublicApiTest do
  # hrw_cluster lives with the hashing package's public API like any user: every
  # call its modules make into an `:hrw` module names a function that hrw
  # documents (a module and a function whose docs are not hidden).
  use ExUnit.Case, async: true

  defp hrw_calls(module) do
    {:ok, {^module, [imports: imports]}} = module |> :code.which() |> :beam_lib.chunks([:imports])

    hrw = Application.spec(:hrw, :modules)
    for {m, f, a} <- imports, m in hrw, do: {m, f, a}
  end

  defp documented?({module, fun, arity}) do
    case Code.fetch_docs(module) do
      {:docs_v1, _, _, _, module_doc, _, docs} when module_doc != :hidden ->
        # A function with default arguments is documented once, at its full arity.
        Enum.any?(docs, fn
          {{kind, ^fun, full}, _, _, doc, meta} when kind in [:function, :macro] ->
            arity in (full - Map.get(meta, :defaults, 0))..full and doc != :hidden

          _ ->
            false
        end)

      _ ->
        false
    end
  end

  test "the cluster package calls only functions that hrw documents" do
    # The package's own modules (a test build also holds test/support's).
    lib = Path.expand("../../lib", __DIR__)

    modules =
      for module <- Application.spec(:hrw_cluster, :modules),
          source = to_string(module.module_info(:compile)[:source]),
          String.starts_with?(source, lib <> "/"),
          do: module

    assert HRW.Cluster.Fingerprint in modules
    calls = modules |> Enum.flat_map(&hrw_calls/1) |> Enum.uniq()

    # The check sees the calls it is meant to judge.
    assert {HRW, :owner, 2} in calls
    # hrw_cluster describes values itself: hrw keeps no function for it alone.
    refute {HRW, :brief, 1} in calls

    assert Enum.reject(calls, &documented?/1) == []
  end

  test "the check tells hrw's hidden functions from its documented ones" do
    refute documented?({HRW.Options, :check!, 3})
    refute documented?({HRW, :no_such_function, 0})
    assert documented?({HRW, :term_id, 1})
  end
end

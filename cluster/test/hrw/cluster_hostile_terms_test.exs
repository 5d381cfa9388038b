defmodule HRW.ClusterHostileTermsTest do
  @moduledoc """
  Hostile terms through every `HRW.Cluster` entry point that takes a term, a count,
  a name or an option: nesting at the depth limit, huge binaries and integers,
  improper lists, node-local terms. Whatever the input, every call answers or
  raises `ArgumentError`, as the hashing package's own entry points do
  (`HRW.TestHostile`, shared with its reliability suite).
  """
  use ExUnit.Case, async: true

  import Bitwise
  import HRW.TestHostile

  @cluster :hrw_cluster_hostile_terms

  setup_all do
    {:ok, cluster} = HRW.Cluster.start(name: @cluster)
    on_exit(fn -> GenServer.stop(cluster) end)
    :ok
  end

  # `t` as a key, a count, a name and an option of the cluster's entry points.
  defp cluster_calls(t) do
    [
      owner: fn -> HRW.Cluster.owner(@cluster, t) end,
      owners: fn -> HRW.Cluster.owners(@cluster, t, 2) end,
      stable_owners: fn -> HRW.Cluster.stable_owners(@cluster, t, 2) end,
      replica_moves: fn -> HRW.Cluster.replica_moves([t, "k"], nil, nil) end,
      fingerprint_member: fn -> HRW.Cluster.Fingerprint.of([t, "a"]) end,
      fingerprint_weighted: fn -> HRW.Cluster.Fingerprint.of([{t, 2}]) end,
      fingerprint_weight: fn -> HRW.Cluster.Fingerprint.of([{"a", t}], weighted: true) end,
      name: fn -> HRW.Cluster.owner(t, "k") end,
      count: fn -> HRW.Cluster.owners(@cluster, "k", t) end,
      back: fn -> HRW.Cluster.owner(@cluster, "k", back: t) end,
      start: fn ->
        # Never starts: the :pg scope does not exist (after the options are checked).
        {:error, _} =
          HRW.Cluster.start(name: :hrw_never, debounce: t, source: {:pg, :hrw_no_scope, :g})
      end
    ]
  end

  test "nesting just under, at and over the 256-level limit, in every container" do
    for kind <- [:mixed | kinds()], depth <- [255, 256, 257, 300], leaf <- [:leaf, 7, "bin"] do
      t = nest(leaf, depth, kind)
      assert misbehaving(t, targets(), [&cluster_calls/1]) == [], "#{kind} #{depth}"
    end
  end

  test "huge binaries and integers, improper lists, node-local and odd terms" do
    huge = :binary.copy(<<0xA5>>, 5_000_000)
    big = 1 <<< 100_000
    port = Port.open({:spawn, "cat"}, [])

    terms = [
      huge,
      binary_part(huge, 3, 4_000_000),
      big,
      -big,
      {huge, big},
      [huge | big],
      nest({huge}, 300, :list),
      [1 | 2],
      ["n1", "n2" | "n3"],
      nest(:x, 100, :improper_tail),
      self(),
      make_ref(),
      port,
      fn -> :ok end,
      <<1::1>>,
      %{self() => make_ref()},
      -0.0,
      0xFFFF_FFFF_FFFF_FFFF + 1,
      :"",
      nil
    ]

    assert_well_behaved(terms, targets(), [&cluster_calls/1])
    Port.close(port)
  end

  test "a cluster's lookups answer as HRW's on the structure it publishes" do
    structure = HRW.Cluster.structure(@cluster)

    for t <- [nest(7, 256, :tuple), nest(:x, 255, :mixed), {self(), make_ref()}, [1 | 2]] do
      assert HRW.Cluster.owner(@cluster, t) == HRW.owner(t, structure)
      assert HRW.Cluster.owners(@cluster, t, 3) == HRW.owners(t, structure, 3)
    end
  end
end

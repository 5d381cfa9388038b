defmodule HRW.Reliability.RandomTermsTest do
  @moduledoc """
  Seeded random terms through every public function: each call answers or raises
  `ArgumentError`, and answers are deterministic. 1000 terms in `mix test`, 3000
  in `./scripts/test`, 30,000 with `HRW_TEST_SIZE=long` (`HRW.TestSize`);
  `HRW_SEED=n` changes the seed (default 3).
  """
  use ExUnit.Case, async: true
  @moduletag :cpu_dependent

  @long HRW.TestSize.level() == :long
  @seed String.to_integer(System.get_env("HRW_SEED", "3"))
  @random_terms HRW.TestSize.pick(quick: 1_000, ci: 3_000, long: 30_000)

  @moduletag timeout: HRW.TestTimeouts.ms(if(@long, do: 1_800_000, else: 600_000))

  import Bitwise
  import HRW.TestHostile

  test "#{@random_terms} random terms (seeded) through every public function" do
    :rand.seed(:exsss, {1, 2, @seed})
    targets = targets()
    terms = for _ <- 1..@random_terms, do: random_term(4)
    assert_well_behaved(terms, targets, [:native, :elixir])
    # Options are validated in Elixir, whose error messages inspect them: small ones.
    small = Enum.filter(terms, &(:erlang.external_size(&1) < 4_000))
    assert length(small) > @random_terms / 2
    assert_well_behaved(small, targets, [:option])

    # Answers are deterministic: the same term gives the same owners twice.
    for t <- Enum.take(terms, 300) do
      assert safe(fn -> HRW.owner(t, targets.skeleton) end) ==
               safe(fn -> HRW.owner(t, targets.skeleton) end)
    end
  end

  defp safe(f) do
    f.()
  rescue
    e in ArgumentError -> {:error, e.message}
  end

  # -- random terms ------------------------------------------------------------------

  defp random_term(0), do: random_leaf()

  defp random_term(depth) do
    case :rand.uniform(20) do
      n when n <= 8 ->
        random_leaf()

      n when n <= 10 ->
        List.to_tuple(for _ <- 1..:rand.uniform(4)//1, do: random_term(depth - 1))

      n when n <= 12 ->
        for _ <- 1..(:rand.uniform(5) - 1)//1, do: random_term(depth - 1)

      13 ->
        # An improper list: a non-list tail after at least one element.
        heads = for _ <- 1..:rand.uniform(4), do: random_term(depth - 1)
        heads ++ random_leaf()

      n when n <= 15 ->
        Map.new(1..:rand.uniform(4)//1, fn _ ->
          {random_term(depth - 1), random_term(depth - 1)}
        end)

      16 when depth >= 3 ->
        # Over 32 keys: a hash-array-mapped map rather than a flat one.
        Map.new(1..(32 + :rand.uniform(20)), fn i -> {random_key(i), random_leaf()} end)

      17 ->
        # {node, weight}-shaped, with weights both valid and hostile.
        {random_term(depth - 1), random_weight()}

      18 when depth == 4 ->
        # Near the nesting limit (only at the top level: nested in more
        # containers, the term would be far past it).
        nest(
          random_term(1),
          250 + :rand.uniform(12),
          Enum.random([:mixed | kinds()] -- [:big_map])
        )

      _ ->
        [random_term(depth - 1) | random_term(depth - 1)]
    end
  end

  defp random_key(i) do
    Enum.random([i, i * 1.0, "#{i}", :"k#{rem(i, 7)}", {i}, [i], <<i::size(rem(i, 9) + 1)>>])
  end

  defp random_weight do
    Enum.random([
      1,
      2,
      0,
      -1,
      0.5,
      1.0e-300,
      5.0e-324,
      1.0e300,
      1 <<< 53,
      (1 <<< 53) + 1,
      1 <<< 200,
      :w,
      "1",
      nil
    ])
  end

  defp random_leaf do
    case :rand.uniform(16) do
      1 -> :rand.uniform(1000) - 500
      2 -> (:rand.uniform(1 <<< 62) <<< :rand.uniform(300)) * Enum.random([1, -1])
      3 -> Enum.random([0.0, -0.0, 1.5, -2.25e-300, 1.0e308, :rand.uniform() * 1.0e10])
      4 -> Enum.random([:a, :b, nil, true, false, :"", :"with space", :ünï])
      5 -> :rand.bytes(:rand.uniform(64) - 1)
      6 -> :binary.copy("ab", :rand.uniform(3000))
      7 -> <<:rand.uniform(255)::size(:rand.uniform(7)), :rand.bytes(:rand.uniform(5))::binary>>
      8 -> Enum.random([self(), make_ref(), hd(Port.list())])
      9 -> Enum.random([fn -> :rand.uniform() end, &Kernel.+/2, &HRW.owner/3])
      10 -> Enum.random([[], {}, %{}, ""])
      11 -> "n#{:rand.uniform(5)}"
      12 -> {"n#{:rand.uniform(3)}", :rand.uniform(4)}
      13 -> binary_part("some binary to slice", :rand.uniform(5), :rand.uniform(10))
      14 -> Enum.random([1 <<< 64, -(1 <<< 63), (1 <<< 63) - 1, 1 <<< 63, 0xFFFF_FFFF_FFFF_FFFF])
      15 -> :rand.uniform(1 <<< 64)
      _ -> random_weight()
    end
  end
end

defmodule HRW.Cluster.Options do
  @moduledoc false
  # The options of `HRW.Cluster` ("Options" and "Names" in docs/CLUSTER.md): checked once,
  # when the server starts or `child_spec/1` is built, into the server's settings;
  # and the `back:` option of its lookups. The checks themselves (keyword list,
  # integer ranges, functions, the skeleton's `:cluster_size`) are `HRW.Cluster.Check`'s,
  # worded as the hashing package's; this module says which option takes which.

  alias HRW.Cluster.{Check, Describe}

  @default_debounce 100
  @default_callback_timeout 5_000
  @max_ms 4_294_967_295
  @max_depth 64
  @max_quorum 65_536
  # A lease shorter than this would lapse on a busy scheduler's delays alone.
  @min_lease 100
  @prefix "HRW.Cluster:"
  # The VM's limit on an atom's length (in code points), less the prefix's.
  @max_name 255 - length(String.to_charlist(@prefix))
  # The caller that option messages of the lookups name.
  @lookup "HRW.Cluster lookup"

  # The last net_ticktime in force that a check read (see net_ticktime/0).
  @ticktime_seen {__MODULE__, :net_ticktime_in_force}

  @options [
    :name,
    :structure,
    :source,
    :debounce,
    :depth,
    :allow,
    :deny,
    :weight_fn,
    :cluster_size,
    :poll_interval,
    :callback_timeout,
    :overrides,
    :quorum,
    :lease
  ]

  @doc """
  The server's settings from `opts` (see "Options" in docs/CLUSTER.md), or
  `ArgumentError` with a bounded message.
  """
  @spec config!(term()) :: map()
  def config!(opts) do
    Check.check!(opts, "HRW.Cluster", @options)

    name = name!(opts)

    structure = Keyword.get(opts, :structure, :skeleton)
    _ = Check.one_of!(structure, "HRW.Cluster :structure", [:skeleton, :ring])

    %{
      name: name,
      structure: structure,
      build_opts: build_opts!(opts, structure),
      source: source!(Keyword.get(opts, :source, :nodes)),
      debounce: integer!(opts, :debounce, @default_debounce, 0, @max_ms),
      depth: integer!(opts, :depth, 1, 1, @max_depth),
      poll_interval: poll_interval!(opts),
      callback_timeout: integer!(opts, :callback_timeout, @default_callback_timeout, 1, @max_ms),
      allow: filter!(opts, :allow),
      deny: filter!(opts, :deny),
      weight_fn: weight_fn!(Keyword.get(opts, :weight_fn)),
      quorum: quorum!(Keyword.get(opts, :quorum, 1)),
      lease: lease!(Keyword.get(opts, :lease)),
      overrides_option: Check.overrides!(Keyword.get(opts, :overrides), "HRW.Cluster")
    }
  end

  defp name!(opts) do
    case Keyword.fetch(opts, :name) do
      {:ok, name} ->
        if valid_name?(name) do
          name
        else
          raise ArgumentError,
                "HRW.Cluster :name must be an atom other than nil, true and false, " <>
                  "at most #{@max_name} characters (code points) long, got: #{Describe.value(name)}"
        end

      :error ->
        raise ArgumentError, "HRW.Cluster requires a :name option"
    end
  end

  defp build_opts!(opts, structure) do
    case Keyword.fetch(opts, :cluster_size) do
      :error ->
        []

      {:ok, _} when structure != :skeleton ->
        raise ArgumentError, "HRW.Cluster :cluster_size applies to structure: :skeleton only"

      {:ok, size} ->
        # Checked now, by the same check as HRW.build/2's, rather than at the first change.
        [cluster_size: Check.cluster_size!(size, "HRW.Cluster")]
    end
  end

  defp source!(:nodes), do: :nodes
  defp source!({:pg, scope, _group} = source) when is_atom(scope), do: source

  defp source!(other) do
    raise ArgumentError,
          "HRW.Cluster :source must be :nodes or {:pg, scope, group}, got: #{Describe.value(other)}"
  end

  defp integer!(opts, key, default, min, max),
    do: Check.integer!(Keyword.get(opts, key, default), "HRW.Cluster", key, min, max)

  defp poll_interval!(opts) do
    if Keyword.has_key?(opts, :poll_interval),
      do: integer!(opts, :poll_interval, nil, 1, @max_ms),
      else: nil
  end

  defp filter!(opts, key) do
    case Keyword.get(opts, key) do
      nil ->
        nil

      fun when is_function(fun, 1) ->
        fun

      regexes when is_list(regexes) ->
        if Check.proper?(regexes) and Enum.all?(regexes, &regex?/1) do
          # Kept as source and options, compiled where they are matched: since OTP
          # 28 a compiled regex is a reference that only the VM that compiled it
          # can run, and options may come from another node or a binary.
          {:regexes, Enum.map(regexes, &{&1.source, &1.opts})}
        else
          raise ArgumentError, bad_filter(key, regexes)
        end

      other ->
        raise ArgumentError, bad_filter(key, other)
    end
  end

  # A regex whose source and options compile here; a map that only claims to be
  # a %Regex{} (keys missing, options of another type) is none.
  defp regex?(%Regex{source: source, opts: opts}) when is_binary(source) do
    match?({:ok, _}, Regex.compile(source, opts))
  rescue
    _ -> false
  catch
    _, _ -> false
  end

  defp regex?(_other), do: false

  defp bad_filter(key, value) do
    "HRW.Cluster #{inspect(key)} must be a function of arity 1 or a list of regexes, " <>
      "got: #{Describe.value(value)}"
  end

  # The fewest members that own keys: `n`, or a majority of `expected`.
  defp quorum!({:majority, expected}) when is_integer(expected) and expected in 1..@max_quorum,
    do: div(expected, 2) + 1

  defp quorum!(n) when is_integer(n) and n in 1..@max_quorum, do: n

  defp quorum!(other) do
    raise ArgumentError,
          "HRW.Cluster :quorum must be an integer in 1..#{@max_quorum} or " <>
            "{:majority, expected} with expected in 1..#{@max_quorum}, got: #{Describe.value(other)}"
  end

  # Off (nil), or the ms within which a member must have answered to count: below
  # the earliest :nodedown of a silent link, 3/4 of the VM's net_ticktime (a
  # longer lease lets a silent side keep its quorum until its failure detection
  # takes the members away, so it bounds nothing).
  defp lease!(nil), do: nil

  defp lease!(ms) when is_integer(ms) and ms in @min_lease..@max_ms do
    ticktime = net_ticktime()

    if ms < ticktime * 750 do
      ms
    else
      raise ArgumentError,
            "HRW.Cluster :lease must be below the VM's earliest failure detection, " <>
              "3/4 of net_ticktime (#{ticktime * 750} ms with net_ticktime #{ticktime} s): " <>
              "a silent side would keep its quorum until its :nodedown anyway, got: #{ms}"
    end
  end

  defp lease!(other) do
    raise ArgumentError,
          "HRW.Cluster :lease must be nil (off) or an integer in #{@min_lease}..#{@max_ms} " <>
            "(milliseconds), got: #{Describe.value(other)}"
  end

  # The VM's net_ticktime in seconds, on every entry point (each checks the
  # options here). During a change the VM tells only the new value: the lower of
  # it and the last value in force that any check read (remembered for that), or
  # the kernel's setting when none did. Not distributed: the kernel's setting.
  defp net_ticktime do
    case :net_kernel.get_net_ticktime() do
      {:ongoing_change_to, new} ->
        min(
          new,
          :persistent_term.get(@ticktime_seen, Application.get_env(:kernel, :net_ticktime, 60))
        )

      seconds when is_integer(seconds) ->
        if :persistent_term.get(@ticktime_seen, nil) != seconds,
          do: :persistent_term.put(@ticktime_seen, seconds)

        seconds

      :ignored ->
        Application.get_env(:kernel, :net_ticktime, 60)
    end
  end

  defp weight_fn!(fun), do: Check.function!(fun, "HRW.Cluster :weight_fn")

  @doc """
  Whether `name` is a valid cluster name: an atom other than `nil`, `true` and
  `false`, short enough for its server's name (see "Names" in docs/CLUSTER.md).
  """
  @spec valid_name?(term()) :: boolean()
  def valid_name?(name) do
    is_atom(name) and name not in [nil, true, false] and
      length(Atom.to_charlist(name)) <= @max_name
  end

  @doc "The server's registered name: `:\"HRW.Cluster:\" <> Atom.to_string(name)`."
  @spec server_name(atom()) :: atom()
  def server_name(name), do: String.to_atom(@prefix <> Atom.to_string(name))

  @doc "The server's registered name if that atom exists (no atom is created)."
  @spec existing_server_name(term()) :: atom() | nil
  def existing_server_name(name) do
    if valid_name?(name), do: String.to_existing_atom(@prefix <> Atom.to_string(name))
  rescue
    ArgumentError -> nil
  end

  @doc """
  The `back:` of a lookup's options (`owner/3`, `owners/4`, `members/2`,
  `structure/2`), checked by `HRW.Cluster.Check` like every entry point's options, and
  against the history's depth.
  """
  @spec back!(term(), pos_integer(), atom()) :: non_neg_integer()
  def back!(opts, depth, name) do
    Check.check!(opts, @lookup, [:back])
    back = Check.non_neg_integer!(Keyword.get(opts, :back, 0), "#{@lookup} :back")

    if back < depth do
      back
    else
      raise ArgumentError,
            "back: #{Describe.value(back)} is beyond the history of HRW.Cluster #{Describe.value(name)}, " <>
              "which keeps #{depth} #{if depth == 1, do: "generation", else: "generations"} " <>
              "(depth: #{depth})"
    end
  end
end

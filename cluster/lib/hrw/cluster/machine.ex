defmodule HRW.Cluster.Machine do
  @moduledoc false
  # Every decision of an `HRW.Cluster` server, as one pure function:
  # `step(machine, event, now) -> {machine, effects}`, `now` being the server's
  # monotonic clock in ms. `HRW.Cluster.Server` turns messages and timers into
  # events and carries out the effects; test/support/cluster_sim.ex drives it over
  # virtual time instead. Nothing here reads a clock, sends, or calls user code.
  #
  # Events: `{:nodeup, node}`, `{:nodedown, node}`, `{:join, nodes}`,
  # `{:leave, nodes, remaining}` (the nodes of the processes that left, and the
  # nodes the group still has), `:source_lost` (a followed :pg scope died),
  # `{:followed, :nodes | :monitored | :polled | {:error, reason}}`,
  # `{:timer, kind}` (`:rebuild`, `:poll`, `:release`, `:tick`, `:lapse`,
  # `:refollow`), `{:evaluated, seq, result}`, `{:built, purpose, spec, result}`,
  # `{:listed, nodes}` (a polled source's nodes), `{:ping, from, node, token}`,
  # `{:pong, token}`, `{:put_overrides, overrides}`.
  #
  # Effects: `{:timer, kind, ms}` (replaces that kind's timer), `{:cancel_timer,
  # kind}`, `{:follow, :monitor | :poll}`, `{:evaluate, seq, job, :await |
  # :async}`, `:cancel_evaluation`, `{:build, purpose, spec}` (built at once; the
  # shell steps `{:built, ...}`), `{:publish, entry, notify}`, `{:extend, until}`,
  # `{:ping, node, token}`, `{:pong, from, token}`, `{:reply, reply}`,
  # `{:log, message}`, `{:stop, reason}`.
  #
  # The rule that makes the order of events irrelevant: every read of the source
  # is compared with the members it replaces, and a member it no longer lists
  # departs, whichever path noticed (a :nodedown, a :pg leave, a poll, a scope
  # that restarted, an entry taken over). With a lease a departed member's keys
  # stay where they are for `Lease.hold/1` from the first time its departure was
  # seen, and whatever was read before a departure is never trusted after it: a
  # departure drops the running evaluation and a new one reads again. Once the
  # hold has passed, a read begun then decides whether the member is still gone.
  # A server answers the heartbeats of the members it lists and has not seen
  # depart only, never holds its own member, and owns no key while its source
  # cannot be read (a :pg scope restarting).

  alias HRW.Cluster.{Describe, Fingerprint, Lease, Snapshot}

  @first_retry 1_000
  @max_retry 30_000
  @default_poll 1_000
  # Between two attempts to follow a :pg scope again after it died.
  @refollow 100

  defstruct [
    :config,
    :lease,
    :history,
    :overrides,
    generation: 0,
    spec: nil,
    snapshot: nil,
    built: nil,
    members: [],
    listed: [],
    until: nil,
    eval: nil,
    seq: 0,
    dirty: false,
    rebuild: false,
    failures: 0,
    started: false,
    stale: false,
    taken_over: false,
    following: nil,
    departed: %{},
    released: MapSet.new()
  ]

  @typedoc """
  `config`: the server's settings (`HRW.Cluster.Options.config!/1`) and `:self`,
  its node. `members`: the entries the published spec holds (or the entry taken
  over held). `until`: while a lease holds the published quorum, when it lapses.
  `eval`: the number of the running evaluation. `departed`: with a lease, the
  members whose departure has been seen, node => {deadline, entry}; `released`:
  those whose hold has passed, until the next read. `stale`: the source was lost
  and has not been read since.
  """
  @type t :: %__MODULE__{}

  @type effect :: tuple() | atom()

  @doc """
  A machine for `config` on node `self`, taking over `previous` (the entry a
  previous server published, as a map, or nil); its first effects.
  """
  @spec new(map(), node(), integer(), map() | nil, integer()) :: {t(), [effect()]}
  def new(config, self, seed, previous, now) do
    config = Map.put(config, :self, self)

    m = %__MODULE__{
      config: config,
      lease: Lease.new(config.lease, self, seed),
      history: Tuple.duplicate(nil, config.depth),
      overrides: config.overrides_option
    }

    {m, effects} = take_over(m, previous)
    ticks = if m.lease, do: [{:timer, :tick, 0}], else: []
    {m, follow_effects} = step(m, :follow, now)
    {m, effects ++ ticks ++ follow_effects}
  end

  defp take_over(m, nil), do: {m, []}

  defp take_over(m, previous) do
    %{spec: spec, option: option, quorum: quorum, lease: lease} = previous
    kept = previous.history |> Tuple.to_list() |> Enum.take(m.config.depth)
    history = List.to_tuple(kept ++ List.duplicate(nil, m.config.depth - length(kept)))
    entry = %{previous | history: history, until: :keep}

    # Overrides put since the previous server started stay, unless this server
    # was started with another :overrides option.
    {_structure, _opts, overrides, entries} = spec
    overrides = if option == m.config.overrides_option, do: overrides, else: m.overrides
    # Another quorum, or a lease on either side: no spec to compare, the first
    # evaluation publishes.
    same? = {quorum, lease, m.config.lease} == {m.config.quorum, nil, nil}

    m = %{
      m
      | generation: previous.generation,
        history: history,
        spec: if(same?, do: spec),
        snapshot: previous.snapshot,
        overrides: overrides,
        members: entries,
        listed: Enum.map(entries, &node_of/1),
        taken_over: true
    }

    {m, [{:publish, entry, nil}]}
  end

  @doc "The machine after `event` at `now`, and the effects to carry out, in order."
  @spec step(t(), term(), integer()) :: {t(), [effect()]}
  def step(m, event, now) do
    {m, effects} = handle(event, m, now)
    {m, List.flatten(effects)}
  end

  defp handle(:follow, m, _now),
    do: {m, [{:follow, if(m.config.poll_interval, do: :poll, else: :monitor)}]}

  # A first start without its source fails; a server that takes an entry over
  # (a restart while the :pg scope restarts too) starts, owns no key, and follows
  # the source once it is back.
  defp handle({:followed, {:error, reason}}, %{started: false, taken_over: false} = m, _now),
    do: {m, [{:stop, reason}]}

  defp handle({:followed, {:error, _reason}}, %{started: false} = m, now),
    do: handle(:source_lost, %{m | started: true}, now)

  defp handle({:followed, {:error, _reason}}, m, _now),
    do: {%{m | following: :lost}, [{:timer, :refollow, @refollow}]}

  defp handle({:followed, how}, %{started: false} = m, _now) do
    {m, polls} = followed(m, how)
    {m, effects} = evaluate(m, :await)
    {m, [polls, effects]}
  end

  # The source is back (a :pg scope restarted): read at once, whatever the
  # failed reads of the meantime had put off.
  defp handle({:followed, how}, m, _now) do
    {m, polls} = followed(m, how)
    {m, effects} = evaluate_now(%{m | failures: 0})
    {m, [polls, effects]}
  end

  # The :pg scope died: until the source is read again this server cannot tell
  # whether its own member is still listed, while the other members may have
  # seen it leave (and will move its keys once it is held long enough): it owns
  # no key meanwhile.
  # A read begun before is not trusted either.
  defp handle(:source_lost, m, now) do
    {m, dropped} = drop_evaluation(%{m | following: :lost, stale: true})
    spec = m.spec || {m.config.structure, m.config.build_opts, m.overrides, m.members}
    {m, effects} = publish(m, spec, m.built, now)
    {m, [dropped, effects, {:timer, :refollow, @refollow}]}
  end

  defp handle({:timer, :refollow}, m, now), do: handle(:follow, m, now)

  defp handle({:nodeup, node}, m, _now), do: m |> returned([node]) |> schedule()
  defp handle({:join, nodes}, m, _now), do: m |> returned(nodes) |> schedule()
  defp handle({:nodedown, node}, m, now), do: departed(m, [node], now)

  # The nodes of the leaving processes that have no other process in the group
  # leave like a nodedown.
  defp handle({:leave, nodes, remaining}, m, now),
    do: departed(m, Enum.uniq(nodes) -- remaining, now)

  # What a polled source lists, read just before the poll: a member it no longer
  # lists (and that has not departed yet) departs now.
  defp handle({:listed, nodes}, m, now) do
    gone =
      for entry <- m.members,
          node = node_of(entry),
          node not in nodes,
          not Map.has_key?(m.departed, node),
          not MapSet.member?(m.released, node),
          do: node

    departed(m, gone, now)
  end

  # With a lease a poll reads at once, every lease period at least: this node
  # sees its own member leave within a period, well before the others' hold of
  # it ends (they see it at the earliest when it left).
  defp handle({:timer, :poll}, m, _now) do
    {m, effects} = if m.lease, do: evaluate_now(m), else: schedule(m)
    {m, [{:timer, :poll, poll_interval(m)} | effects]}
  end

  defp handle({:timer, :rebuild}, m, _now), do: evaluate(%{m | rebuild: false}, :async)

  # The deadlines decide, so even a late or early timer releases nothing early.
  # A member whose hold has passed leaves only if a read begun now no longer
  # lists it: it may be back (a link that healed, a member that joined again)
  # with no event seen yet (a polled source).
  defp handle({:timer, :release}, m, now) do
    {due, held} = Enum.split_with(m.departed, fn {_node, {at, _entry}} -> at <= now end)

    if due == [] do
      {m, [release_timer(m, now)]}
    else
      released = MapSet.union(m.released, MapSet.new(due, &elem(&1, 0)))
      {m, dropped} = drop_evaluation(%{m | departed: Map.new(held), released: released})
      {m, read} = evaluate(%{m | rebuild: false}, :async)
      {m, [dropped, read, release_timer(m, now)]}
    end
  end

  defp handle({:timer, :tick}, %{lease: %Lease{} = lease} = m, now) do
    {lease, pings} = Lease.tick(lease, now)
    {m, effects} = leased(%{m | lease: lease}, now)
    sends = for {node, token} <- pings, do: {:ping, node, token}
    {m, [{:timer, :tick, lease.period}, sends, effects]}
  end

  defp handle({:timer, :lapse}, %{lease: %Lease{}} = m, now), do: leased(m, now)

  # Every server answers the heartbeats of its members, with or without a lease,
  # and only theirs: a member counts this server toward its quorum only while
  # this server lists it. So one whose departure this server has seen (held, or
  # removed) stops counting it within its lease, whatever still connects them (a
  # :pg member that left while its node stays connected, a scope that restarted).
  defp handle({:ping, from, node, token}, m, _now) do
    if node in m.listed and not Map.has_key?(m.departed, node),
      do: {m, [{:pong, from, token}]},
      else: {m, []}
  end

  defp handle({:pong, token}, %{lease: %Lease{} = lease} = m, now) do
    case Lease.answer(lease, token, now) do
      {lease, true} -> leased(%{m | lease: lease}, now)
      {lease, false} -> {%{m | lease: lease}, []}
    end
  end

  defp handle({:evaluated, seq, result}, %{eval: seq} = m, now),
    do: evaluated(%{m | eval: nil}, result, now)

  # The result of an evaluation dropped since, or anything else: nothing to do.
  defp handle({:evaluated, _seq, _result}, m, _now), do: {m, []}

  defp handle({:built, :members, spec, {:ok, structure}}, m, now),
    do: publish(m, spec, structure, now)

  defp handle({:built, :members, _spec, {:error, message}}, m, _now), do: failed(m, message)

  defp handle({:built, :without, spec, {:ok, structure}}, m, now),
    do: publish(m, spec, structure, now)

  defp handle({:built, :without, spec, {:error, message}}, m, _now) do
    gone = m.members -- members_of(spec)
    text = "HRW.Cluster #{Describe.value(m.config.name)}: #{message} (#{Describe.value(gone)})"
    {m, [{:log, text}]}
  end

  defp handle({:built, :overrides, spec, {:ok, structure}}, m, now) do
    {m, effects} = publish(m, spec, structure, now)
    {m, [effects, {:reply, :ok}]}
  end

  defp handle({:built, :overrides, _spec, {:error, message}}, m, _now),
    do: {m, [{:reply, {:error, "HRW.Cluster #{Describe.value(m.config.name)}: #{message}"}}]}

  defp handle({:put_overrides, overrides}, m, _now) do
    m = %{m | overrides: overrides}

    case m.spec do
      {structure, opts, old, entries} when old != overrides ->
        {m, [{:build, :overrides, {structure, opts, overrides, entries}}]}

      _same_or_none ->
        {m, [{:reply, :ok}]}
    end
  end

  # Timers of a lease this machine does not have, forged events: nothing.
  defp handle(_event, m, _now), do: {m, []}

  defp followed(m, :polled), do: {%{m | following: :polled}, [{:timer, :poll, poll_interval(m)}]}

  defp followed(m, how), do: {%{m | following: how}, []}

  defp poll_interval(%{lease: nil} = m), do: m.config.poll_interval || @default_poll
  defp poll_interval(m), do: min(m.config.poll_interval || @default_poll, m.lease.period)

  # A read now, unless one runs (then one more after it) or failures are being
  # retried (then their backoff decides).
  defp evaluate_now(%{eval: nil, failures: 0} = m), do: evaluate(%{m | rebuild: false}, :async)
  defp evaluate_now(m), do: schedule(m)

  # -- evaluations -----------------------------------------------------------------

  # The first event of a burst starts the debounce; the rest ride on it (or on a
  # pending retry). Events during an evaluation ask for one more after it.
  defp schedule(%{eval: nil, rebuild: false} = m),
    do: {%{m | rebuild: true}, [{:timer, :rebuild, m.config.debounce}]}

  defp schedule(%{eval: nil} = m), do: {m, []}
  defp schedule(m), do: {%{m | dirty: true}, []}

  # The job carries what this machine holds now; the result is judged by what it
  # holds then (`evaluated/3`).
  defp evaluate(m, mode) do
    seq = m.seq + 1
    held = for {_node, {_at, entry}} <- m.departed, do: entry
    job = %{held: held, overrides: m.overrides, spec: m.spec}
    {%{m | eval: seq, seq: seq, dirty: false}, [{:evaluate, seq, job, mode}]}
  end

  defp drop_evaluation(%{eval: nil} = m), do: {m, []}
  defp drop_evaluation(m), do: {%{m | eval: nil, dirty: false}, [:cancel_evaluation]}

  defp evaluated(m, {:error, message}, _now), do: failed(m, message)

  defp evaluated(m, {:read, read, built}, now) do
    listed = Enum.map(read, &node_of/1)
    # A departed member the source lists again (a read begun after its departure)
    # follows the source; a member the read no longer lists departs.
    stale? = m.stale
    m = %{m | departed: Map.drop(m.departed, listed), started: true, failures: 0, stale: false}
    # Released members (their hold passed) leave now unless listed.
    vanished =
      for e <- m.members,
          node_of(e) not in listed,
          not held?(m, e),
          not MapSet.member?(m.released, node_of(e)),
          do: node_of(e)

    m = %{m | released: MapSet.new()}
    {m, held} = hold(m, vanished, now)
    kept = for {_node, {_at, entry}} <- m.departed, do: entry
    spec = {m.config.structure, m.config.build_opts, m.overrides, Enum.sort(read ++ kept)}

    {m, effects} =
      cond do
        spec == m.spec and not stale? -> {m, []}
        match?({:built, ^spec, _}, built) -> publish(m, spec, elem(built, 2), now)
        spec == m.spec and m.built != nil -> publish(m, spec, m.built, now)
        true -> {m, [{:build, :members, spec}]}
      end

    {m, more} = if m.dirty, do: schedule(%{m | dirty: false}), else: {m, []}
    {m, [held, effects, more]}
  end

  defp held?(m, entry), do: Map.has_key?(m.departed, node_of(entry))

  defp failed(%{started: false, taken_over: false} = m, message),
    do: {m, [{:stop, {:evaluation_failed, message}}]}

  defp failed(m, message) do
    failures = m.failures + 1
    delay = min(@first_retry * 2 ** min(failures - 1, 5), @max_retry)

    text =
      "HRW.Cluster #{Describe.value(m.config.name)}: #{message}; " <>
        "kept the previous members, next attempt in #{delay} ms"

    m = %{m | failures: failures, rebuild: true, dirty: false, started: true}
    {m, [{:log, text}, {:timer, :rebuild, delay}]}
  end

  # -- departures ------------------------------------------------------------------

  # A departure seen by an event: what was read before it is not trusted (the
  # running evaluation is dropped), the member leaves at once or, with a lease,
  # after its hold, and the source is read again after the debounce.
  defp departed(m, [], _now), do: {m, []}

  defp departed(m, nodes, now) do
    {m, dropped} = drop_evaluation(m)

    self = m.config.self
    {m, held} = hold(m, nodes, now)
    {m, scheduled} = schedule(m)
    # Last: the build's publish supersedes what was decided before it.
    {m, removed} = remove_now(m, if(m.lease, do: Enum.filter(nodes, &(&1 == self)), else: nodes))
    {m, [dropped, held, scheduled, removed]}
  end

  # With a lease, departed members keep their keys until their own quorum must
  # have lapsed: it counted this side only from answers to heartbeats sent before
  # the departure was first seen here, each good for the lease at most by its
  # clock (`Lease.hold/1`). Their answers are forgotten now. Without a lease,
  # nothing is held (`remove_now/2` or the read itself removes them).
  # This server's own member is never held: holding it would only keep it naming
  # itself.
  defp hold(%{lease: nil} = m, _nodes, _now), do: {m, []}

  defp hold(m, nodes, now) do
    case nodes -- [m.config.self] do
      [] -> {m, []}
      others -> hold_others(m, others, now)
    end
  end

  defp hold_others(m, nodes, now) do
    at = now + Lease.hold(m.lease.ms)

    departed =
      Enum.reduce(m.members, m.departed, fn entry, departed ->
        if node_of(entry) in nodes,
          do: Map.put_new(departed, node_of(entry), {at, entry}),
          else: departed
      end)

    m = %{m | lease: Lease.forget(m.lease, nodes), departed: departed}
    {m, effects} = leased(m, now)
    {m, [effects, release_timer(m, now)]}
  end

  # Members that are back (a nodeup, a join) follow the source again.
  defp returned(m, nodes),
    do: %{
      m
      | departed: Map.drop(m.departed, nodes),
        released: MapSet.difference(m.released, MapSet.new(nodes))
    }

  defp release_timer(%{departed: departed}, _now) when departed == %{},
    do: {:cancel_timer, :release}

  defp release_timer(m, now) do
    at = m.departed |> Enum.map(fn {_node, {at, _entry}} -> at end) |> Enum.min()
    {:timer, :release, max(at - now, 0)}
  end

  # Removes `nodes` from the published members now: built and published before
  # the server takes its next message.
  defp remove_now(%{spec: nil} = m, _nodes), do: {m, []}

  defp remove_now(m, nodes) do
    {structure, opts, overrides, entries} = m.spec
    kept = Enum.reject(entries, &(node_of(&1) in nodes))

    if kept == entries,
      do: {m, []},
      else: {m, [{:build, :without, {structure, opts, overrides, kept}}]}
  end

  # -- publishing ------------------------------------------------------------------

  # Publishes what `spec` built: lookups answer from it when its members reach
  # the quorum (with a lease: those heard from lately, and until it lapses).
  defp publish(m, spec, structure, now) do
    entries = members_of(spec)
    nodes = Enum.map(entries, &node_of/1)
    {quorum?, until, lease} = quorum(m, nodes, now)
    until = if quorum? and is_integer(until), do: until
    m = %{m | built: structure, lease: lease, until: until, members: entries, listed: nodes}

    snapshot = %Snapshot{
      name: m.config.name,
      generation: m.generation + 1,
      fingerprint: Fingerprint.of(entries, weighted: m.config.weight_fn != nil),
      members: nodes,
      quorum?: quorum?,
      structure: nil
    }

    {m, effects} = put(m, spec, if(quorum?, do: structure), snapshot)
    {m, [effects, lapse_timer(m, now)]}
  end

  # Still no structure, and the same members (only the overrides or options
  # changed): the new spec is kept, with no new generation and no message.
  defp put(%{generation: generation, snapshot: %Snapshot{} = old} = m, spec, nil, snapshot)
       when generation > 0 and elem(m.history, 0) == nil and
              old.fingerprint == snapshot.fingerprint and old.members == snapshot.members and
              old.quorum? == snapshot.quorum? do
    {%{m | spec: spec}, [{:publish, entry(m, spec, m.history, :always, old), nil}]}
  end

  defp put(m, spec, structure, snapshot) do
    old = elem(m.history, 0)
    depth = tuple_size(m.history)
    history = m.history |> Tuple.insert_at(0, structure) |> Tuple.delete_at(depth)
    previous = m.snapshot && %{m.snapshot | structure: old}
    notify = {previous, %{snapshot | structure: structure}}
    m = %{m | generation: m.generation + 1, history: history, spec: spec, snapshot: snapshot}
    {m, [{:publish, entry(m, spec, history, m.until || :always, snapshot), notify}]}
  end

  defp entry(m, spec, history, until, snapshot) do
    %{
      generation: m.generation,
      history: history,
      until: until,
      spec: spec,
      option: m.config.overrides_option,
      quorum: m.config.quorum,
      lease: m.config.lease,
      snapshot: snapshot
    }
  end

  # No quorum while the source cannot be read (`:source_lost`).
  defp quorum(m, nodes, now) do
    case m do
      %{lease: nil} -> {length(nodes) >= m.config.quorum and not m.stale, :always, nil}
      %{stale: true} -> {false, nil, elem(Lease.check(m.lease, nodes, m.config.quorum, now), 2)}
      _ -> Lease.check(m.lease, nodes, m.config.quorum, now)
    end
  end

  # A lease's quorum lapsed or came back, the members unchanged: published like a
  # change. While it holds, the entry's `until` follows the answers.
  defp leased(%{spec: spec, snapshot: %Snapshot{quorum?: held}} = m, now) when spec != nil do
    case quorum(m, m.lease.nodes, now) do
      {^held, until, lease} when held == false or is_integer(m.until) == is_integer(until) ->
        m = %{m | lease: lease, until: if(held and is_integer(until), do: until)}
        extend = if held and is_integer(until), do: [{:extend, until}], else: []
        {m, [extend, lapse_timer(m, now)]}

      {_changed, _until, lease} ->
        publish(%{m | lease: lease}, spec, m.built, now)
    end
  end

  defp leased(m, _now), do: {m, []}

  defp lapse_timer(%{lease: nil}, _now), do: []
  defp lapse_timer(%{until: nil}, _now), do: {:cancel_timer, :lapse}
  defp lapse_timer(%{until: until}, now), do: {:timer, :lapse, max(until - now, 0)}

  defp members_of({_structure, _opts, _overrides, entries}), do: entries
  defp node_of({node, _weight}), do: node
  defp node_of(node), do: node
end

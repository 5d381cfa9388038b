defmodule ShardedStore.Simulator do
  @moduledoc false
  # A seeded, deterministic simulation of a store: replicas that are
  # `ShardedStore.Machine` states (the code the real replicas run), a simple
  # membership view (a member killed leaves it after a departure wait, the lease's
  # or a short one; one restarted inside the wait never leaves it), each node's
  # cluster publishing it at its own delay, a network that delays, reorders, loses
  # and duplicates messages, monitors that fire late, and clients that write and
  # read through `ShardedStore.write_outcome/3` and `read_outcome/2`.
  #
  # Virtual time in ms; one random stream, from the seed, decides everything, so
  # a seed replays its schedule exactly.
  #
  # Checked after every step:
  #   * lost: every acknowledged write (or a write that wins over it) is held by a
  #     live replica;
  #   * stale: a read that answers answers at least the highest write
  #     acknowledged before it began;
  #   * copies: once settled (every survivor has seen every failure, processed
  #     the view and finished its pushes and its sync), every acknowledged write
  #     has two live copies: so a failure after settling loses nothing.
  # Failures come one at a time: a kill only when settled.

  alias ShardedStore.{Machine, Order}

  @tick 200
  @client_timeout 5_000

  defstruct [
    :rng,
    :opts,
    now: 0,
    seq: 0,
    # Events in the queue that bring news of a failure or a view.
    news: 0,
    # Actions of a named schedule still to come.
    planned: 0,
    # A kill or an acknowledgement since the last check, and whether the store
    # was settled then.
    dirty: false,
    was_settled: false,
    view_fingerprint: nil,
    # The minority side of a silent cut (a named schedule's), empty otherwise.
    cut: MapSet.new(),
    cut_keys: MapSet.new(),
    queue: nil,
    nodes: [],
    alive: %{},
    incarnation: %{},
    replicas: %{},
    view: [],
    generation: 1,
    published: %{},
    departing: %{},
    monitors: %{},
    ops: %{},
    acked: %{},
    versions: %{},
    trace: [],
    stats: %{}
  ]

  @defaults [
    nodes: 5,
    spares: 0,
    keys: 8,
    lease: true,
    forget: 5_000,
    loss: 0.02,
    dup: 0.02,
    max_delay: 15,
    # A monitor's :DOWN arrives down_min + 1 to down_max ms after the kill.
    down_min: 0,
    down_max: 40,
    horizon: 3_000,
    quiesce: 60_000,
    rate: 25,
    actions: nil,
    # Keys a named schedule loses on purpose (a double failure): their reads are
    # still checked.
    lost_ok: [],
    # node => extra ms on every message that node's replica receives.
    slow: %{},
    # Keys whose reads a named schedule expects to be stale (a documented gap):
    # traced, not a violation.
    stale_ok: [],
    # Random silent cuts.
    cuts: false
  ]

  @doc "Runs one schedule: {:ok, sim} or {:error, reason, sim}."
  def run(seed, opts \\ []) do
    opts = Keyword.merge(@defaults, opts)
    rng = :rand.seed_s(:exsss, {seed, seed * 7 + 1, seed * 13 + 2})
    nodes = for i <- 1..(opts[:nodes] + opts[:spares]), do: :"n#{i}@sim"
    {initial, _spares} = Enum.split(nodes, opts[:nodes])
    sim = %__MODULE__{rng: rng, opts: opts, queue: :gb_sets.new(), nodes: nodes, view: initial}
    sim = %{sim | published: Map.new(initial, &{&1, snap(sim, initial)})}
    sim = %{sim | view_fingerprint: HRW.Cluster.Fingerprint.of(initial)}
    sim = Enum.reduce(initial, sim, &start_replica(&2, &1))

    sim =
      case opts[:actions] do
        nil ->
          schedule(sim, 1, {:act})

        actions ->
          Enum.reduce(actions, sim, fn {t, action}, sim -> at(sim, t, {:action, action}) end)
      end

    loop(sim)
  catch
    {:violation, reason, sim} -> {:error, reason, sim}
  end

  # -- the loop ---------------------------------------------------------------------

  defp loop(sim) do
    cond do
      sim.now > sim.opts[:horizon] + sim.opts[:quiesce] ->
        throw({:violation, :never_settled, sim})

      # Once the actions stop, the schedule ends when everything is done.
      sim.now > sim.opts[:horizon] and sim.ops == %{} and sim.departing == %{} and
        sim.planned == 0 and settled?(sim) ->
        {:ok, sim}

      true ->
        case pop(sim) do
          nil -> {:ok, sim}
          {sim, event} -> sim |> handle(event) |> check() |> loop()
        end
    end
  end

  defp pop(sim) do
    if :gb_sets.is_empty(sim.queue) do
      nil
    else
      {{at, _seq, event}, queue} = :gb_sets.take_smallest(sim.queue)
      sim = %{sim | queue: queue, now: at, news: sim.news - news(event)}
      {%{sim | planned: sim.planned - planned(event)}, event}
    end
  end

  defp schedule(sim, delay, event), do: at(sim, sim.now + delay, event)

  defp at(sim, time, event) do
    queue = :gb_sets.add({time, sim.seq, event}, sim.queue)
    sim = %{sim | queue: queue, seq: sim.seq + 1, news: sim.news + news(event)}
    %{sim | planned: sim.planned + planned(event)}
  end

  defp news(event) when elem(event, 0) in [:down, :publish, :notify, :join], do: 1
  defp news(_event), do: 0

  defp planned({:action, _}), do: 1
  defp planned(_event), do: 0

  defp rand(sim, n) do
    {x, rng} = :rand.uniform_s(n, sim.rng)
    {x, %{sim | rng: rng}}
  end

  defp chance(sim, p) do
    {x, rng} = :rand.uniform_s(sim.rng)
    {x < p, %{sim | rng: rng}}
  end

  defp pick(sim, list) do
    {i, sim} = rand(sim, length(list))
    {Enum.at(list, i - 1), sim}
  end

  defp trace(sim, entry), do: %{sim | trace: [{sim.now, entry} | sim.trace]}

  defp count(sim, what), do: %{sim | stats: Map.update(sim.stats, what, 1, &(&1 + 1))}

  defp majority(sim), do: div(sim.opts[:nodes], 2) + 1

  defp snap(sim, members) do
    Machine.snapshot(members, length(members) >= majority(sim), sim.generation)
  end

  defp live(sim), do: for({node, inc} <- sim.alive, inc != nil, do: node) |> Enum.sort()

  # -- events -----------------------------------------------------------------------

  defp handle(sim, {:act}) do
    {action, sim} = random_action(sim)
    sim = if action == :nothing, do: sim, else: act(trace(sim, action), action)
    {gap, sim} = rand(sim, sim.opts[:rate] * 2)
    if sim.now < sim.opts[:horizon], do: schedule(sim, gap, {:act}), else: sim
  end

  defp handle(sim, {:action, action}), do: act(sim, action)

  defp handle(sim, {:tick, node, inc}) do
    if sim.alive[node] == inc do
      sim = step(sim, node, {:peers, incarnations(sim, node), sim.now})
      sim = step(sim, node, {:tick, sim.now})
      schedule(sim, @tick, {:tick, node, inc})
    else
      sim
    end
  end

  # The node's cluster publishes the current view; its replica hears of it later.
  defp handle(sim, {:publish, node, inc}) do
    if sim.alive[node] == inc do
      sim = %{sim | published: Map.put(sim.published, node, snap(sim, sim.view))}
      {delay, sim} = rand(sim, 10)
      schedule(sim, delay, {:notify, node, inc})
    else
      sim
    end
  end

  # As the process does: the :pg group first, then the published view.
  defp handle(sim, {:notify, node, inc}) do
    if sim.alive[node] == inc do
      sim
      |> step(node, {:peers, incarnations(sim, node), sim.now})
      |> step(node, {:view, sim.published[node], sim.now})
    else
      sim
    end
  end

  defp handle(sim, {:depart, node, token}) do
    if sim.departing[node] == token do
      sim = %{sim | departing: Map.delete(sim.departing, node)}
      change_view(trace(sim, {:view_drops, node}), sim.view -- [node])
    else
      sim
    end
  end

  defp handle(sim, {:join, node, inc}) do
    if sim.alive[node] == inc and node not in sim.view,
      do: change_view(trace(sim, {:view_adds, node}), Enum.sort([node | sim.view])),
      else: sim
  end

  defp handle(sim, {:down, {watcher, inc}, incarnation}) do
    if sim.alive[watcher] == inc,
      do: step(sim, watcher, {:down, incarnation, sim.now}),
      else: sim
  end

  # Across a cut nothing arrives.
  defp handle(sim, {:deliver, from, to, message}) do
    if across?(sim, from, receiver(sim, to)),
      do: count(sim, :cut),
      else: deliver(sim, to, message)
  end

  defp handle(sim, {:timeout, ref}) do
    case sim.ops[ref] do
      nil -> sim
      op -> finish(sim, ref, op)
    end
  end

  defp deliver(sim, {:client, ref}, message), do: client(sim, ref, message)

  defp deliver(sim, to, message) do
    node =
      case to do
        {:node, node} -> if sim.alive[node] != nil, do: node
        {node, inc} -> if sim.alive[node] == inc, do: node
      end

    if node, do: receive_message(sim, node, message), else: count(sim, :undelivered)
  end

  defp receiver(sim, {:client, ref}), do: sim.ops[ref][:coordinator]
  defp receiver(_sim, {:node, node}), do: node
  defp receiver(_sim, {node, _inc}), do: node

  defp across?(sim, a, b), do: MapSet.member?(sim.cut, a) != MapSet.member?(sim.cut, b)

  # A node's :pg group lists the replicas on its side of a cut.
  defp incarnations(sim, node) do
    for n <- live(sim), not across?(sim, node, n), do: {n, sim.alive[n]}
  end

  defp receive_message(sim, node, {:client_write, ref, key, version, value, fingerprint}) do
    published = sim.published[node].fingerprint
    event = {:write, key, version, value, fingerprint, published, sim.now}
    reply(sim, node, ref, event)
  end

  defp receive_message(sim, node, {:client_read, ref, key}),
    do: reply(sim, node, ref, {:read, key, sim.now})

  defp receive_message(sim, node, {:sync, from, ref}),
    do: sim |> trace({:sync, from, node}) |> step(node, {:sync, from, ref, sim.now})

  defp receive_message(sim, node, {:sync_reply, from, ref, fingerprint, entries, gone}) do
    sim
    |> trace({:sync_reply, from, node})
    |> step(node, {:sync_reply, from, ref, fingerprint, entries, gone, sim.now})
  end

  defp receive_message(sim, node, message), do: step(sim, node, message)

  defp reply(sim, node, ref, event) do
    {machine, effects} = Machine.step(sim.replicas[node], event)
    sim = effects(%{sim | replicas: Map.put(sim.replicas, node, machine)}, node, effects)
    [answer] = for {:reply, answer} <- effects, do: answer
    send_message(sim, node, {:client, ref}, {:reply, node, answer})
  end

  defp step(sim, node, event) do
    {machine, effects} = Machine.step(sim.replicas[node], event)

    if Enum.any?(effects, &match?({:reply, _}, &1)),
      do: throw({:violation, {:reply_outside_a_call, event}, sim})

    effects(%{sim | replicas: Map.put(sim.replicas, node, machine)}, node, effects)
  end

  defp effects(sim, node, effects) do
    Enum.reduce(effects, sim, fn
      {:send, to, message}, sim ->
        send_message(sim, node, to, message)

      {:monitor, {watched, inc} = incarnation}, sim ->
        watcher = {node, sim.alive[node]}

        if sim.alive[watched] == inc and not across?(sim, node, watched) do
          monitors = Map.update(sim.monitors, incarnation, [watcher], &[watcher | &1])
          %{sim | monitors: monitors}
        else
          down(sim, watcher, incarnation)
        end

      {:reply, _}, sim ->
        sim

      {:dropped, _}, sim ->
        count(sim, :dropped)
    end)
  end

  defp down(sim, watcher, incarnation) do
    {delay, sim} = rand(sim, sim.opts[:down_max] - sim.opts[:down_min])
    schedule(sim, sim.opts[:down_min] + delay, {:down, watcher, incarnation})
  end

  # The network: each message is lost, or delivered once or twice, each copy
  # after its own delay (so messages overtake each other).
  defp send_message(sim, from, to, message) do
    {lost, sim} = chance(sim, sim.opts[:loss])

    if lost do
      count(sim, :lost)
    else
      {dup, sim} = chance(sim, sim.opts[:dup])

      Enum.reduce(if(dup, do: [1, 2], else: [1]), sim, fn _, sim ->
        {delay, sim} = rand(sim, sim.opts[:max_delay] + 1)

        extra =
          case to do
            {:node, node} -> Map.get(sim.opts[:slow], node, 0)
            {:client, _} -> 0
            {node, _incarnation} -> Map.get(sim.opts[:slow], node, 0)
          end

        schedule(sim, delay - 1 + extra, {:deliver, from, to, message})
      end)
    end
  end

  defp change_view(sim, view) do
    fingerprint = HRW.Cluster.Fingerprint.of(view)
    sim = %{sim | view: view, generation: sim.generation + 1, view_fingerprint: fingerprint}

    Enum.reduce(live(sim), sim, fn node, sim ->
      if MapSet.member?(sim.cut, node) do
        sim
      else
        {delay, sim} = rand(sim, 20)
        schedule(sim, delay, {:publish, node, sim.alive[node]})
      end
    end)
  end

  # -- nodes ------------------------------------------------------------------------

  defp start_replica(sim, node) do
    inc = Map.get(sim.incarnation, node, 0) + 1
    sim = %{sim | incarnation: Map.put(sim.incarnation, node, inc)}
    sim = %{sim | alive: Map.put(sim.alive, node, inc)}
    me = {node, inc}
    machine = Machine.new(me, sim.opts[:forget], sim.published[node], sim.now)
    sim = %{sim | replicas: Map.put(sim.replicas, node, machine)}
    sim = step(sim, node, {:peers, incarnations(sim, node), sim.now})
    sim = step(sim, node, {:tick, sim.now})
    {delay, sim} = rand(sim, @tick)
    schedule(sim, delay, {:tick, node, inc})
  end

  defp kill(sim, node) do
    incarnation = {node, sim.alive[node]}
    {watchers, monitors} = Map.pop(sim.monitors, incarnation, [])

    sim = %{
      sim
      | dirty: true,
        alive: Map.put(sim.alive, node, nil),
        replicas: Map.delete(sim.replicas, node),
        monitors: monitors
    }

    sim = Enum.reduce(watchers, sim, &down(&2, &1, incarnation))
    {jitter, sim} = rand(sim, 50)
    wait = if sim.opts[:lease], do: 1_000 + jitter, else: 30 + jitter
    token = sim.seq

    if node in sim.view do
      sim = %{sim | departing: Map.put(sim.departing, node, token)}
      schedule(sim, wait, {:depart, node, token})
    else
      sim
    end
  end

  # Back empty under the same name. Inside the departure wait the view never
  # drops it; after it, the view adds it again once its cluster is seen.
  defp restart(sim, node) do
    inside = Map.has_key?(sim.departing, node)
    sim = count(sim, if(inside, do: :restarts_inside_wait, else: :restarts))
    sim = %{sim | departing: Map.delete(sim.departing, node)}
    own = if node in sim.view, do: sim.view, else: Enum.sort([node | sim.view])
    sim = %{sim | published: Map.put(sim.published, node, snap(sim, own))}
    sim = start_replica(trace(sim, {:restarted, node, if(inside, do: :inside_wait)}), node)

    if node in sim.view do
      sim
    else
      {delay, sim} = rand(sim, 60)
      schedule(sim, delay, {:join, node, sim.alive[node]})
    end
  end

  # -- actions ----------------------------------------------------------------------

  defp random_action(sim) do
    {n, sim} = rand(sim, 100)
    {key, sim} = rand(sim, sim.opts[:keys])
    {coordinator, sim} = pick(sim, live(sim))

    cond do
      n <= 45 -> {{:write, key, coordinator}, sim}
      n <= 70 -> {{:read, key, coordinator}, sim}
      n <= 76 -> {{:same_version, key}, sim}
      n <= 86 -> pick_kill(sim)
      n <= 96 -> pick_restart(sim)
      n <= 98 and sim.opts[:cuts] -> pick_cut(sim)
      true -> {{:junk, coordinator}, sim}
    end
  end

  defp pick_kill(sim) do
    if settled?(sim) and length(live(sim)) > majority(sim) do
      {node, sim} = pick(sim, live(sim))
      {{:kill, node}, sim}
    else
      {:nothing, sim}
    end
  end

  # A silent cut of two members off the others, healed 1.5 to 4.5 s later, when
  # the store has settled and the other side keeps a majority.
  defp pick_cut(sim) do
    if MapSet.size(sim.cut) == 0 and settled?(sim) and length(live(sim)) - 2 >= majority(sim) do
      {a, sim} = pick(sim, live(sim))
      {b, sim} = pick(sim, live(sim) -- [a])
      {after_ms, sim} = rand(sim, 3_000)
      {{:cut, [a, b], 1_500 + after_ms}, sim}
    else
      {:nothing, sim}
    end
  end

  defp pick_restart(sim) do
    case if(MapSet.size(sim.cut) == 0, do: sim.nodes -- live(sim), else: []) do
      [] ->
        {:nothing, sim}

      dead ->
        {node, sim} = pick(sim, dead)
        {{:restart, node}, sim}
    end
  end

  defp act(sim, :nothing), do: sim

  defp act(sim, {:kill, node}) do
    cond do
      sim.alive[node] == nil -> sim
      not settled?(sim) -> throw({:violation, {:kill_before_settled, node}, sim})
      true -> sim |> count(:kills) |> kill(node)
    end
  end

  # For named schedules: a kill as soon as the store has settled, and a double
  # failure (the second kill without waiting).
  defp act(sim, {:kill_when_settled, node}), do: act(sim, {:kill_when_settled, node, []})

  # `after_kill`: actions to take that many ms after the kill.
  defp act(sim, {:kill_when_settled, node, after_kill}) do
    if settled?(sim) do
      sim = act(trace(sim, {:kill, node}), {:kill, node})

      Enum.reduce(after_kill, sim, fn {ms, action}, sim ->
        schedule(sim, ms, {:action, action})
      end)
    else
      schedule(sim, 5, {:action, {:kill_when_settled, node, after_kill}})
    end
  end

  defp act(sim, {:kill_now, node}) do
    if sim.alive[node] == nil, do: sim, else: sim |> trace({:kill_now, node}) |> kill(node)
  end

  defp act(sim, {:read_when_settled, key, coordinator}) do
    # Settled, and no dead member left in the view (a read asks every member).
    if settled?(sim) and sim.departing == %{},
      do: act(trace(sim, {:read, key, coordinator}), {:read, key, coordinator}),
      else: schedule(sim, 5, {:action, {:read_when_settled, key, coordinator}})
  end

  # A silent cut: nothing crosses it, monitors across it fire, the majority's
  # view drops the minority once its lease must have lapsed (the cluster's
  # promise), the minority's quorum lapses with its lease and its view stays.
  defp act(sim, {:cut, minority, heal_after}),
    do: sim |> act({:cut, minority}) |> schedule(heal_after, {:action, :heal})

  defp act(sim, {:cut, minority}) do
    # The keys whose two owners are on the minority: their reads on the majority
    # side may miss what the minority acknowledged (a documented gap) until the
    # store settles after the heal.
    cut_keys =
      for key <- 1..sim.opts[:keys],
          Enum.all?(HRW.owners(key, sim.view, 2), &(&1 in minority)),
          into: MapSet.new(),
          do: key

    sim = %{sim | cut: MapSet.new(minority), cut_keys: cut_keys}
    sim = trace(count(sim, :cuts), {:cut, minority})

    sim =
      Enum.reduce(sim.monitors, sim, fn {{watched, _} = incarnation, watchers}, sim ->
        Enum.reduce(watchers, sim, fn {watcher, _} = w, sim ->
          if across?(sim, watcher, watched), do: down(sim, w, incarnation), else: sim
        end)
      end)

    sim = Enum.reduce(minority, sim, &schedule(&2, 1_000, {:action, {:lapse, &1}}))
    schedule(sim, 1_030, {:action, {:view_drops_cut, minority}})
  end

  defp act(sim, {:lapse, node}) when not is_map_key(sim.replicas, node), do: sim

  defp act(sim, {:lapse, node}) do
    members = sim.published[node].members
    sim = %{sim | published: Map.put(sim.published, node, Machine.snapshot(members, false))}
    step(trace(sim, {:lapse, node}), node, {:view, sim.published[node], sim.now})
  end

  defp act(sim, {:view_drops_cut, minority}),
    do: change_view(trace(sim, {:view_drops, minority}), sim.view -- minority)

  defp act(sim, :heal) do
    minority = MapSet.to_list(sim.cut)
    sim = trace(%{sim | cut: MapSet.new()}, :heal)
    change_view(sim, Enum.sort(sim.view ++ minority))
  end

  defp act(sim, {:restart, node}) do
    if sim.alive[node] == nil, do: restart(sim, node), else: sim
  end

  defp act(sim, {:write, key, coordinator}) do
    version = Map.get(sim.versions, key, 0) + 1
    sim = %{sim | versions: Map.put(sim.versions, key, version)}
    write(sim, key, version, {key, version}, coordinator)
  end

  # Two writers pick one version with the values 1 and 1.0 (equal in term order,
  # not identical), at random times.
  defp act(sim, {:same_version, key}) do
    version = Map.get(sim.versions, key, 0) + 1
    sim = %{sim | versions: Map.put(sim.versions, key, version)}
    {a, sim} = pick(sim, live(sim))
    {b, sim} = pick(sim, live(sim))
    sim |> write(key, version, 1.0, a) |> write(key, version, 1, b)
  end

  defp act(sim, {:write, key, version, value, coordinator}),
    do: write(sim, key, version, value, coordinator)

  defp act(sim, {:read, key, coordinator}) do
    if sim.alive[coordinator] == nil do
      sim
    else
      snapshot = sim.published[coordinator]
      ref = make_op_ref(sim)
      floor = Map.get(sim.acked, key)

      op = %{
        kind: :read,
        key: key,
        coordinator: coordinator,
        # The client runs on this incarnation of the coordinator: killed, it is gone.
        incarnation: sim.alive[coordinator],
        fingerprint: snapshot.fingerprint,
        quorum?: snapshot.quorum?,
        expect: snapshot.members,
        replies: %{},
        floor: floor,
        excused: MapSet.member?(sim.cut_keys, key)
      }

      sim = %{sim | ops: Map.put(sim.ops, ref, op), seq: sim.seq + 1}

      sim =
        Enum.reduce(
          snapshot.members,
          sim,
          &send_message(&2, coordinator, {:node, &1}, {:client_read, ref, key})
        )

      sim = schedule(sim, @client_timeout, {:timeout, ref})
      if snapshot.members == [], do: finish(sim, ref, op), else: sim
    end
  end

  # A message of a shape no replica sends, to every replica of a node.
  defp act(sim, {:junk, node}) do
    junk = [
      {:hrw_cluster_snapshot, :sharded_store, nil, :junk},
      {:handoff, :nobody, make_ref(), %{1 => {1, :v}}},
      {:handoff, {node, 1}, make_ref(), [{1, {99, :v}}]},
      {:handoff, {node, 1}, make_ref(), %{1 => {:x, :y}, 2 => :v}},
      {:handoff_ack, make_ref(), "n"},
      {:sync, :nobody, make_ref()},
      {:sync_reply, {node, 1}, make_ref(), 0, %{1 => {1.5, :v}}, [{:x, :notalist, -5}, :junk]},
      {:sync_reply, {node, 1}, make_ref(), :fp, %{}, []},
      {:sync_reply, {node, 1}, make_ref(), 0, :junk, :junk},
      {:peers, :junk, 0},
      {:down, :junk, 0},
      {:view, %{members: :junk}, 0},
      {:tick, :soon},
      :junk
    ]

    {message, sim} = pick(sim, junk)
    sim = count(sim, :junk_sent)

    case message do
      {:sync, _, _} = sync -> receive_message(sim, node, sync)
      {:sync_reply, _, _, _, _, _} = reply -> receive_message(sim, node, reply)
      other -> step(sim, node, other)
    end
  end

  defp write(sim, key, version, value, coordinator) do
    snapshot = sim.published[coordinator]

    owners =
      if sim.alive[coordinator] != nil and snapshot.quorum? and snapshot.structure != nil,
        do: HRW.owners(key, snapshot.structure, 2),
        else: []

    if length(owners) == 2 do
      ref = make_op_ref(sim)

      op = %{
        kind: :write,
        key: key,
        entry: {version, value},
        coordinator: coordinator,
        # The client runs on this incarnation of the coordinator: killed, it is gone.
        incarnation: sim.alive[coordinator],
        fingerprint: snapshot.fingerprint,
        expect: owners,
        replies: %{}
      }

      sim = %{sim | ops: Map.put(sim.ops, ref, op), seq: sim.seq + 1}
      message = {:client_write, ref, key, version, value, snapshot.fingerprint}
      sim = Enum.reduce(owners, sim, &send_message(&2, coordinator, {:node, &1}, message))
      schedule(sim, @client_timeout, {:timeout, ref})
    else
      sim
    end
  end

  defp make_op_ref(sim), do: {:op, sim.seq}

  defp client(sim, ref, {:reply, node, answer}) do
    case sim.ops[ref] do
      nil ->
        sim

      op ->
        op = %{op | replies: Map.put_new(op.replies, node, answer)}
        sim = %{sim | ops: Map.put(sim.ops, ref, op)}
        if map_size(op.replies) == length(op.expect), do: finish(sim, ref, op), else: sim
    end
  end

  defp finish(sim, ref, op) do
    sim = %{sim | ops: Map.delete(sim.ops, ref)}
    replies = Enum.map(op.expect, &Map.get(op.replies, &1, {:error, :timeout}))
    alive? = op.incarnation != nil and sim.alive[op.coordinator] == op.incarnation

    case op.kind do
      :write when alive? ->
        published = sim.published[op.coordinator].fingerprint

        case ShardedStore.write_outcome(replies, op.fingerprint, published) do
          :ok ->
            acked = Map.get(sim.acked, op.key)
            best = if acked == nil, do: op.entry, else: Order.max([acked, op.entry])
            sim = %{sim | acked: Map.put(sim.acked, op.key, best), dirty: true}
            count(trace(sim, {:acked, op.key, op.entry}), :acked)

          refused ->
            count(trace(sim, {:not_acked, op.key, op.entry, refused}), :not_acked)
        end

      :read when alive? ->
        answer =
          if op.quorum?,
            do: ShardedStore.read_outcome(replies, op.fingerprint),
            else: {:error, :no_quorum}

        sim = trace(sim, {:read_answer, op.key, answer})
        sim = if match?({:error, _}, answer), do: trace(sim, {:read_replies, replies}), else: sim
        check_read(sim, op, answer)

      _ ->
        sim
    end
  end

  defp check_read(sim, op, answer) do
    case {answer, op.floor} do
      {{:error, _}, _} ->
        count(sim, :reads_refused)

      {_, nil} ->
        count(sim, :reads)

      {{:ok, entry}, floor} ->
        if Order.compare(entry, floor) == :lt,
          do: stale(sim, op, entry, floor),
          else: count(sim, :reads)

      {:not_found, floor} ->
        stale(sim, op, :not_found, floor)
    end
  end

  defp stale(sim, op, answer, floor) do
    key = op.key

    if key in sim.opts[:stale_ok] or op.excused,
      do: trace(sim, {:stale_read, key, answer, floor}),
      else: throw({:violation, {:stale_read, key, answer, floor}, sim})
  end

  # -- the promises -----------------------------------------------------------------

  # A copy goes only with a kill (a replica never drops an entry) and the
  # promises change only with an acknowledgement or a kill: the checks below run
  # after every step that does either, and when the store becomes settled, so
  # they hold after every step.
  defp check(sim) do
    acked = Map.drop(sim.acked, sim.opts[:lost_ok])

    if sim.dirty do
      Enum.each(acked, fn {key, entry} ->
        if copies(sim, key, entry) == 0, do: throw({:violation, {:lost, key, entry}, sim})
      end)
    end

    settled = settled?(sim)

    sim =
      if settled and (sim.dirty or not sim.was_settled) do
        Enum.each(acked, fn {key, entry} ->
          if copies(sim, key, entry) < 2,
            do: throw({:violation, {:one_copy_once_settled, key, entry}, sim})
        end)

        count(sim, :settled_checks)
      else
        sim
      end

    cut_keys = if settled and MapSet.size(sim.cut) == 0, do: MapSet.new(), else: sim.cut_keys
    %{sim | dirty: false, was_settled: settled, cut_keys: cut_keys}
  end

  defp copies(sim, key, {version, _} = entry) do
    Enum.count(sim.replicas, fn {_node, machine} ->
      case machine.data do
        %{^key => {held, _}} when held > version -> true
        %{^key => {^version, _} = held} -> Order.compare(held, entry) != :lt
        _ -> false
      end
    end)
  end

  # Every survivor has seen every failure (no monitor, publication or addition
  # on its way), processed the view, and shows no pending work in its status
  # (pushes and sync): what `ShardedStore.status/0` shows, and no more (whether
  # it has seen a new replica in the :pg group yet is not asked). The view may
  # still hold a dead member (the lease's departure wait).
  def settled?(sim) do
    # A cut is a failure until it heals and the store settles after it.
    sim.news == 0 and MapSet.size(sim.cut) == 0 and settled_replicas?(sim)
  end

  defp settled_replicas?(sim) do
    fingerprint = sim.view_fingerprint
    incarnations = for {n, inc} <- sim.alive, inc != nil, do: {n, inc}

    Enum.all?(incarnations, fn {node, _inc} ->
      machine = sim.replicas[node]

      machine.pending == %{} and machine.snapshot.fingerprint == fingerprint and
        sim.published[node].fingerprint == fingerprint and node in sim.view and
        elem(Machine.status(machine), 1) == 0
    end)
  end

  @doc "The schedule's actions and failures, last first, at most `n`."
  def last_trace(sim, n \\ 40), do: Enum.take(sim.trace, n)
end

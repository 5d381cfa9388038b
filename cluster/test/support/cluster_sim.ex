defmodule HRW.ClusterSim do
  @moduledoc """
  A deterministic simulator of `HRW.Cluster` servers: several `HRW.Cluster.Machine`s
  on virtual time, each with its own clock (rates within 1% of each other's
  bound), a network that delays, reorders, duplicates and loses heartbeats, and
  membership sources of every kind (`:nodes`, a monitored and a polled `:pg`
  group). A schedule (from a seed, or written by hand) cuts and heals links,
  kills and restarts nodes faster or slower than the lease, freezes servers
  (their events queue), restarts servers (the new one takes the entry over),
  makes group members leave and join, and restarts `:pg` scopes.

  After every event it checks the promises:
    * `:overlap` (with a lease): a member that another node, answering with
      quorum, has removed after seeing it depart never names itself with quorum
      at the same instant;
    * `:lapse` (with a lease): a node's readers answer with quorum only while
      enough members answered its heartbeats within the lease, by its clock;
    * `:settle`: once the schedule's events stop, every node publishes its
      source's members within the documented delay.

  `run(schedule)` returns `:ok` or `{:error, violation}`.
  """

  alias HRW.Cluster.{Lease, Machine}

  # -- schedules -----------------------------------------------------------------

  @doc "A random schedule from `seed`."
  def schedule(seed) do
    r = :rand.seed_s(:exsss, seed)
    {n, r} = :rand.uniform_s(3, r)
    n = n + 2
    nodes = for i <- 1..n, do: :"n#{i}"
    {source, r} = pick([:nodes, :pg_monitored, :pg_polled], r)
    {lease?, r} = :rand.uniform_s(r)
    {lease, r} = :rand.uniform_s(400, r)
    lease = if lease? < 0.75, do: 100 + lease
    {majority?, r} = :rand.uniform_s(r)
    quorum = if majority? < 0.7, do: div(n, 2) + 1, else: 1
    {debounce, r} = :rand.uniform_s(150, r)
    {poll, r} = :rand.uniform_s(200, r)
    {loss, r} = :rand.uniform_s(r)
    {dup, r} = :rand.uniform_s(r)
    {delay, r} = :rand.uniform_s(40, r)
    {rates, r} = Enum.map_reduce(nodes, r, fn _, r -> :rand.uniform_s(21, r) end)
    {count, r} = :rand.uniform_s(6, r)
    {actions, _r} = Enum.map_reduce(1..(count + 1), r, fn _, r -> action(nodes, source, r) end)

    %{
      seed: seed,
      nodes: nodes,
      source: source,
      lease: lease,
      quorum: quorum,
      debounce: debounce,
      poll: 20 + poll,
      loss: loss * 0.2,
      dup: dup * 0.1,
      delay: delay,
      rates: Map.new(Enum.zip(nodes, Enum.map(rates, &(989 + &1)))),
      actions: Enum.sort(actions)
    }
  end

  defp action(nodes, source, r) do
    {at, r} = :rand.uniform_s(2_500, r)
    {a, r} = pick(nodes, r)
    {b, r} = pick(nodes -- [a], r)
    {ms, r} = :rand.uniform_s(900, r)
    kinds = [:cut, :cut, :partition, :kill, :freeze, :server_restart, :heal]
    kinds = if source == :nodes, do: kinds, else: kinds ++ [:leave, :scope_restart]
    {kind, r} = pick(kinds, r)

    action =
      case kind do
        :cut -> {:cut, a, b, ms}
        :partition -> {:partition, [a], ms}
        :kill -> {:kill, a, ms}
        :freeze -> {:freeze, a, ms}
        :server_restart -> {:server_restart, a}
        :heal -> {:heal_all}
        :leave -> {:leave, a, ms}
        :scope_restart -> {:scope_restart, a, ms}
      end

    {{300 + at, action}, r}
  end

  defp pick(list, r) do
    {i, r} = :rand.uniform_s(length(list), r)
    {Enum.at(list, i - 1), r}
  end

  # -- running -------------------------------------------------------------------

  @doc "Runs `schedule`: `:ok`, or `{:error, {kind, time, text}}` at the first broken promise."
  def run(schedule) do
    world = init(schedule)
    last = schedule.actions |> Enum.map(&elem(&1, 0)) |> Enum.max(fn -> 0 end)
    world = Enum.reduce(schedule.actions, world, fn {at, a}, w -> push(w, at, {:action, a}) end)
    # Everything the schedule broke comes back (links, nodes, scopes, members).
    world = push(world, last + 1_000, {:action, {:restore}})
    world = loop(world, last + 1_000)

    case world.violation do
      nil -> settled(world)
      violation -> {:error, violation}
    end
  end

  defp init(s) do
    world = %{
      s: s,
      t: 0,
      seq: 0,
      queue: :gb_sets.empty(),
      violation: nil,
      quiet: 0,
      cut: MapSet.new(),
      nodes: %{},
      removed: %{},
      since: %{},
      untils: %{},
      pg_last: %{},
      held_since: %{},
      seen: %{},
      obs: %{},
      tokens: %{},
      answered: %{},
      rand: :rand.seed_s(:exsss, {s.seed, 7, 11})
    }

    world =
      Enum.reduce(s.nodes, world, fn n, w ->
        node = %{
          inc: 1,
          alive: true,
          offset: :erlang.phash2({s.seed, n}, 1_000_000) * 1000,
          busy: 0,
          conn: MapSet.new(s.nodes),
          in_group: true,
          scope: 1,
          scope_up: true,
          pg: MapSet.new(s.nodes),
          m: nil,
          server: 1,
          followed: 0,
          timers: %{},
          entry: nil,
          view: nil
        }

        put_in(w.nodes[n], node)
      end)

    world =
      Enum.reduce(s.nodes, world, fn n, w -> Enum.reduce(s.nodes, w, &observe(&2, n, &1)) end)

    Enum.reduce(s.nodes, world, &start_server(&2, &1, nil))
  end

  defp config(s) do
    %{
      name: :sim,
      structure: :ring,
      build_opts: [],
      source: if(s.source == :nodes, do: :nodes, else: {:pg, :scope, :group}),
      debounce: s.debounce,
      depth: 1,
      poll_interval: if(s.source == :pg_polled, do: s.poll),
      callback_timeout: 5_000,
      allow: nil,
      deny: nil,
      weight_fn: nil,
      quorum: s.quorum,
      lease: s.lease,
      overrides_option: nil
    }
  end

  defp start_server(w, n, previous) do
    node = w.nodes[n]
    server = node.server + 1
    w = put_in(w.nodes[n], %{node | server: server, timers: %{}, m: nil, followed: 0})
    seed = :erlang.phash2({w.s.seed, n, node.inc, server})
    {m, effects} = Machine.new(config(w.s), n, seed, previous, clock(w, n))
    w = put_in(w.nodes[n].m, m)
    effects(w, n, effects)
  end

  defp loop(w, last) do
    cond do
      w.violation != nil ->
        w

      :gb_sets.is_empty(w.queue) ->
        w

      true ->
        {{t, _seq, item}, queue} = :gb_sets.take_smallest(w.queue)

        if t > max(last, w.quiet) + bound(w.s) do
          w
        else
          w = %{w | queue: queue, t: t}
          w = item(w, item)
          # A heartbeat changes neither a view nor what a node has heard.
          if heartbeat?(item), do: loop(w, last), else: loop(check(w), last)
        end
    end
  end

  defp heartbeat?({:deliver, _from, _to, _server, {:ping, _, _, _}}), do: true
  defp heartbeat?({:server, _n, _server, {:ping, _, _, _}}), do: true
  defp heartbeat?(_item), do: false

  # The documented delay: the debounce, a poll, a departed member's hold, the
  # retry after a failed read (a scope restarting) and the network's delays.
  defp bound(s) do
    hold = if s.lease, do: Lease.hold(s.lease), else: 0
    s.debounce + s.poll + hold + 1_000 + 200 + 4 * s.delay + 100
  end

  defp push(w, at, item) do
    %{w | queue: :gb_sets.add({at, w.seq, item}, w.queue), seq: w.seq + 1}
  end

  defp rand(w, range) do
    {x, r} = :rand.uniform_s(range, w.rand)
    {x, %{w | rand: r}}
  end

  defp chance(w, p) do
    {x, r} = :rand.uniform_s(w.rand)
    {x < p, %{w | rand: r}}
  end

  # This node's monotonic clock: its own offset and rate (parts per thousand).
  defp clock(w, n), do: w.nodes[n].offset + div(w.t * w.s.rates[n], 1000)
  defp real(w, n, ms), do: w.t + div(ms * 1000 + w.s.rates[n] - 1, w.s.rates[n])

  # -- events --------------------------------------------------------------------

  defp item(w, {:action, action}), do: act(w, action)

  defp item(w, {:source, fun}), do: fun.(%{w | quiet: w.t})

  defp item(w, {:deliver, from, to, server, message}) do
    cond do
      not connected?(w, from, to) -> w
      server == :any -> item(w, {:server, to, w.nodes[to].server, message})
      true -> item(w, {:server, to, server, message})
    end
  end

  defp item(w, {:server, n, server, event}) do
    node = w.nodes[n]

    cond do
      not node.alive or node.server != server -> w
      # A busy or suspended server: its events wait, in order.
      w.t < node.busy -> push(w, node.busy, {:server, n, server, event})
      true -> server_event(w, n, event)
    end
  end

  defp server_event(w, n, {:timer, kind, id}) do
    if w.nodes[n].timers[kind] == id do
      w = update_in(w.nodes[n].timers, &Map.delete(&1, kind))
      w = if kind == :poll, do: poll_read(w, n), else: w
      step(w, n, {:timer, kind})
    else
      w
    end
  end

  defp server_event(w, n, {:read, seq, job}) do
    {read, incs} = read(w, n)

    result =
      if read == :error, do: {:error, "reading the :source raised"}, else: result(read, job)

    {delay, w} = rand(w, 30)
    push(w, w.t + delay, {:server, n, w.nodes[n].server, {:evaluated, seq, result, incs}})
  end

  defp server_event(w, n, {:evaluated, seq, result, incs}) do
    w = if w.nodes[n].m.eval == seq, do: Enum.reduce(incs, w, &observe(&2, n, &1)), else: w
    step(w, n, {:evaluated, seq, result})
  end

  defp server_event(w, n, {:pong, token}) do
    w =
      case w.tokens[{n, token}] do
        {to, stamp} ->
          update_in(w.answered, &Map.update(&1, {n, to}, stamp, fn s -> max(s, stamp) end))

        nil ->
          w
      end

    step(w, n, {:pong, token})
  end

  defp server_event(w, n, {:nodeup, x} = event), do: w |> observe(n, x) |> step(n, event)
  defp server_event(w, n, {:join, xs} = event), do: w |> observe_all(n, xs) |> step(n, event)
  defp server_event(w, n, event), do: step(w, n, event)

  # As the server does: a poll reads the group's nodes first.
  defp poll_read(w, n) do
    case read(w, n) do
      {:error, _} -> w
      {nodes, _incs} -> step(w, n, {:listed, nodes})
    end
  end

  defp observe_all(w, n, xs), do: Enum.reduce(xs, w, &observe(&2, n, &1))

  # What `n`'s server last learnt of `x`: the incarnation it saw listed.
  defp observe(w, n, x), do: put_in(w.obs[{n, x}], w.nodes[x].inc)

  defp trace(w, text), do: if(Process.get(:hrw_sim_trace), do: IO.puts("#{w.t} #{text}"))

  defp step(w, n, event) do
    if Process.get(:hrw_sim_trace) && not match?({t, _} when t in [:ping, :pong], event) &&
         not match?({:ping, _, _, _}, event),
       do: IO.puts("#{w.t} #{n} <- #{inspect(event, limit: 4)}")

    before = w.nodes[n].m.departed
    {m, effects} = Machine.step(w.nodes[n].m, event, clock(w, n))
    w = put_in(w.nodes[n].m, m)
    w = Enum.reduce(Map.keys(m.departed) -- Map.keys(before), w, &put_in(&2.seen[{n, &1}], w.t))
    effects(w, n, effects)
  end

  defp result(read, job) do
    listed = read
    held = Enum.reject(job.held, &(&1 in listed))
    spec = {:ring, [], job.overrides, Enum.sort(listed ++ held)}

    if spec == job.spec,
      do: {:read, read, :unchanged},
      else: {:read, read, {:built, spec, elem(spec, 3)}}
  end

  # The source as `n` reads it, and the incarnations it lists.
  defp read(w, n) do
    node = w.nodes[n]

    cond do
      w.s.source == :nodes -> listed(w, Enum.sort(MapSet.to_list(node.conn)))
      node.scope_up -> listed(w, Enum.sort(MapSet.to_list(node.pg)))
      true -> {:error, []}
    end
  end

  defp listed(_w, nodes), do: {nodes, nodes}

  defp effects(w, n, effects), do: Enum.reduce(effects, w, &effect(&2, n, &1))

  defp effect(w, n, {:timer, kind, ms}) do
    id = w.seq
    w = put_in(w.nodes[n].timers[kind], id)
    push(w, real(w, n, ms), {:server, n, w.nodes[n].server, {:timer, kind, id}})
  end

  defp effect(w, n, {:cancel_timer, kind}),
    do: update_in(w.nodes[n].timers, &Map.delete(&1, kind))

  defp effect(w, n, {:follow, how}) do
    node = w.nodes[n]

    result =
      cond do
        w.s.source == :nodes -> :nodes
        not node.scope_up -> {:error, {:pg_scope_not_started, :scope}}
        how == :monitor -> :monitored
        true -> :polled
      end

    w = if is_atom(result), do: put_in(w.nodes[n].followed, node.scope), else: w
    step(w, n, {:followed, result})
  end

  defp effect(w, n, {:evaluate, seq, job, :await}) do
    {read, incs} = read(w, n)
    w = observe_all(w, n, incs)

    result =
      if read == :error, do: {:error, "reading the :source raised"}, else: result(read, job)

    step(w, n, {:evaluated, seq, result})
  end

  defp effect(w, n, {:evaluate, seq, job, :async}) do
    {delay, w} = rand(w, 20)
    push(w, w.t + delay, {:server, n, w.nodes[n].server, {:read, seq, job}})
  end

  defp effect(w, n, {:build, purpose, {_, _, _, entries} = spec}),
    do: step(w, n, {:built, purpose, spec, {:ok, entries}})

  defp effect(w, n, {:publish, entry, _notify}) do
    old = w.nodes[n].view

    if Process.get(:hrw_sim_trace),
      do:
        IO.puts(
          "#{w.t} #{n} publishes #{inspect(elem(entry.history, 0))} until #{inspect(entry.until)} (clock #{clock(w, n)}) departed #{inspect(Map.keys(w.nodes[n].m.departed))}"
        )

    until = if entry.until == :keep, do: old && old.until, else: entry.until
    structure = elem(entry.history, 0)
    view = %{members: structure || [], until: until || :always, listed: entry.snapshot.members}
    w = put_in(w.nodes[n].view, view)
    w = put_in(w.nodes[n].entry, %{entry | until: nil})
    before = if old, do: old.listed, else: []

    w =
      Enum.reduce(before -- view.listed, w, fn x, w ->
        w
        |> early(n, x)
        |> put_in([:removed, {n, x}], {w.obs[{n, x}], Map.get(w.seen, {n, x}, w.t)})
      end)

    Enum.reduce(view.listed, w, fn x, w -> update_in(w.removed, &Map.delete(&1, {n, x})) end)
  end

  defp effect(w, n, {:extend, until}) do
    if w.nodes[n].view, do: put_in(w.nodes[n].view.until, until), else: w
  end

  defp effect(w, n, {:ping, to, token}) do
    w = put_in(w.tokens[{n, token}], {to, clock(w, n)})
    send_message(w, n, to, :any, {:ping, {n, w.nodes[n].server}, n, token})
  end

  defp effect(w, n, {:pong, {to, server}, token}),
    do: send_message(w, n, to, server, {:pong, token})

  defp effect(w, _n, _other), do: w

  # With a lease, another member leaves `n`'s view only once its hold has passed
  # by `n`'s clock since `n` first saw it depart.
  defp early(%{s: %{lease: lease}} = w, n, x) when lease != nil and n != x do
    seen = Map.get(w.seen, {n, x})
    waited = seen && div((w.t - seen) * w.s.rates[n], 1000)

    if w.violation == nil and (seen == nil or waited < Lease.hold(lease) - 1) do
      text =
        "#{n} removed #{x} #{inspect(waited)} ms after it saw it depart (hold #{Lease.hold(lease)})"

      %{w | violation: {:early, w.t, text}}
    else
      w
    end
  end

  defp early(w, _n, _x), do: w

  # A message between two servers: lost on a cut link, else delayed, perhaps
  # duplicated or lost.
  defp send_message(w, from, to, server, message) do
    if connected?(w, from, to) do
      {lost?, w} = chance(w, w.s.loss)
      {dup?, w} = chance(w, w.s.dup)
      copies = if lost?, do: 0, else: if(dup?, do: 2, else: 1)

      Enum.reduce(List.duplicate(message, copies), w, fn message, w ->
        {delay, w} = rand(w, w.s.delay + 1)
        push(w, w.t + delay - 1, {:deliver, from, to, server, message})
      end)
    else
      w
    end
  end

  defp connected?(w, a, b) do
    a == b or
      (w.nodes[a].alive and w.nodes[b].alive and not cut?(w, a, b) and
         MapSet.member?(w.nodes[a].conn, b) and MapSet.member?(w.nodes[b].conn, a))
  end

  defp cut?(w, a, b), do: MapSet.member?(w.cut, Enum.sort([a, b]))

  # -- the schedule's actions and the sources they change --------------------------

  defp act(w, {:noop}), do: w

  defp act(w, {:cut, a, b, ms}) do
    w = %{w | cut: MapSet.put(w.cut, Enum.sort([a, b]))}
    w = w |> detect(a, b) |> detect(b, a)
    push(w, w.t + ms, {:action, {:heal, a, b}})
  end

  defp act(w, {:heal, a, b}) do
    w = %{w | cut: MapSet.delete(w.cut, Enum.sort([a, b]))}
    reconnect(w, a, b)
  end

  defp act(w, {:partition, [a], ms}) do
    Enum.reduce(w.s.nodes -- [a], w, fn b, w -> act(w, {:cut, a, b, ms}) end)
  end

  defp act(w, {:heal_all}) do
    pairs = MapSet.to_list(w.cut)
    w = %{w | cut: MapSet.new()}
    Enum.reduce(pairs, w, fn [a, b], w -> reconnect(w, a, b) end)
  end

  defp act(w, {:kill, a, ms}) do
    if w.nodes[a].alive do
      w = update_in(w.nodes[a], &%{&1 | alive: false, busy: 0})
      w = Enum.reduce(w.s.nodes -- [a], w, &detect(&2, &1, a, 50))
      push(w, w.t + ms, {:action, {:revive, a}})
    else
      w
    end
  end

  defp act(w, {:revive, a}) do
    if w.nodes[a].alive do
      w
    else
      node = w.nodes[a]
      me = MapSet.new([a])

      node = %{
        node
        | alive: true,
          inc: node.inc + 1,
          conn: me,
          pg: me,
          in_group: true,
          scope_up: true,
          scope: node.scope + 1,
          entry: nil,
          view: nil
      }

      w = put_in(w.nodes[a], node)
      w = %{w | answered: Map.reject(w.answered, fn {{n, _}, _} -> n == a end), quiet: w.t}
      w = start_server(w, a, nil)
      Enum.reduce(w.s.nodes -- [a], w, &reconnect(&2, a, &1))
    end
  end

  defp act(w, {:freeze, a, ms}), do: put_in(w.nodes[a].busy, max(w.nodes[a].busy, w.t + ms))

  defp act(w, {:server_restart, a}) do
    node = w.nodes[a]
    if node.alive and node.entry, do: start_server(w, a, node.entry), else: w
  end

  defp act(w, {:leave, a, ms}) do
    if w.nodes[a].alive and w.nodes[a].in_group do
      w = put_in(w.nodes[a].in_group, false)
      w = Enum.reduce(w.s.nodes, w, &pg_leave(&2, &1, a))
      push(w, w.t + ms, {:action, {:rejoin, a}})
    else
      w
    end
  end

  defp act(w, {:rejoin, a}) do
    if w.nodes[a].alive and not w.nodes[a].in_group do
      w = put_in(w.nodes[a].in_group, true)
      Enum.reduce(w.s.nodes, w, &pg_join(&2, &1, a))
    else
      w
    end
  end

  defp act(w, {:scope_restart, a, ms}) do
    node = w.nodes[a]

    if node.alive and node.scope_up do
      monitored? = node.followed == node.scope and node.m.following in [:monitored, :polled]
      w = put_in(w.nodes[a], %{node | scope_up: false, pg: MapSet.new(), scope: node.scope + 1})
      w = if monitored?, do: push(w, w.t, {:server, a, node.server, :source_lost}), else: w
      w = Enum.reduce(w.s.nodes -- [a], w, &pg_leave(&2, &1, a))
      push(w, w.t + ms, {:action, {:scope_up, a}})
    else
      w
    end
  end

  defp act(w, {:scope_up, a}) do
    if w.nodes[a].alive and not w.nodes[a].scope_up do
      w = put_in(w.nodes[a].scope_up, true)
      w = %{w | quiet: w.t}

      Enum.reduce(w.s.nodes, w, fn c, w ->
        w = pg_join(w, a, c)
        if c == a, do: w, else: pg_join(w, c, a)
      end)
    else
      w
    end
  end

  defp act(w, {:restore}) do
    w = act(w, {:heal_all})
    pairs = for a <- w.s.nodes, b <- w.s.nodes, a < b, do: {a, b}
    w = Enum.reduce(pairs, w, fn {a, b}, w -> reconnect(w, a, b) end)

    Enum.reduce(w.s.nodes, w, fn a, w ->
      w = act(w, {:revive, a})
      w = act(w, {:scope_up, a})
      act(w, {:rejoin, a})
    end)
  end

  # `n` notices that `x` is gone, after a delay of its own.
  # A link cut silently is seen after up to `:detect` ms (1,500 unless the
  # schedule says), a killed node's after up to 50.
  defp detect(w, n, x, max \\ nil) do
    {delay, w} = rand(w, max || Map.get(w.s, :detect, 1_500))

    push(
      w,
      w.t + delay,
      {:source,
       fn w ->
         if w.nodes[n].alive and MapSet.member?(w.nodes[n].conn, x) and
              not connected_now?(w, n, x) do
           w |> disconnect(n, x) |> overlapping(n, x)
         else
           w
         end
       end}
    )
  end

  # OTP's prevent_overlapping_partitions (the default): a node that loses `x`
  # makes the nodes connected to it disconnect from `x` as well, and so on; a
  # disconnection closes the connection, seen on both sides at once.
  defp overlapping(w, n, x) do
    Enum.reduce(w.s.nodes -- [n, x], w, fn c, w ->
      # Only over a link that works: `n` tells `c`.
      if MapSet.member?(w.nodes[c].conn, n) and MapSet.member?(w.nodes[c].conn, x) and
           connected_now?(w, n, c) do
        w |> disconnect(c, x) |> disconnect(x, c) |> overlapping(c, x) |> overlapping(x, c)
      else
        w
      end
    end)
  end

  defp disconnect(w, n, x) do
    if w.nodes[n].alive and MapSet.member?(w.nodes[n].conn, x) do
      trace(w, "#{n} disconnects from #{x}")
      w = update_in(w.nodes[n].conn, &MapSet.delete(&1, x))
      w = if w.s.source == :nodes, do: to_server(w, n, {:nodedown, x}), else: w
      pg_leave(w, n, x)
    else
      w
    end
  end

  # A link that works again connects both sides, each after a delay.
  defp reconnect(w, a, b), do: w |> connect(a, b) |> connect(b, a)

  defp connect(w, n, x) do
    {delay, w} = rand(w, 100)

    push(
      w,
      w.t + delay,
      {:source,
       fn w ->
         possible? =
           w.nodes[n].alive and w.nodes[x].alive and not cut?(w, n, x) and
             not MapSet.member?(w.nodes[n].conn, x)

         cond do
           possible? and meshes?(w, n, x) ->
             trace(w, "#{n} connects to #{x}")
             w = update_in(w.nodes[n].conn, &MapSet.put(&1, x))
             w = if w.s.source == :nodes, do: to_server(w, n, {:nodeup, x}), else: w
             w = pg_join(w, n, x)
             # global's connect_all (the default): a node connects to the nodes
             # its new neighbour is connected to.
             w = mesh(w, n, x)
             mesh(w, x, n)

           # global tries again while a third node's cut keeps them apart.
           possible? ->
             connect(w, n, x)

           true ->
             w
         end
       end}
    )
  end

  # global (connect_all, prevent_overlapping_partitions) joins two nodes only
  # when each reaches the other's neighbours: a cut that stays non-transitive
  # keeps them apart, as the documented overlapping partition would otherwise.
  defp meshes?(w, n, x) do
    neighbours =
      MapSet.union(w.nodes[n].conn, w.nodes[x].conn) |> MapSet.delete(n) |> MapSet.delete(x)

    Enum.all?(neighbours, &(not cut?(w, &1, n) and not cut?(w, &1, x)))
  end

  defp mesh(w, n, x) do
    missing = MapSet.difference(w.nodes[x].conn, w.nodes[n].conn)
    Enum.reduce(missing, w, &reconnect(&2, n, &1))
  end

  defp connected_now?(w, n, x), do: w.nodes[x].alive and not cut?(w, n, x)

  # When `n`'s scope learns the next change of `x`'s member: after a delay, and
  # in the order they happened (:pg's messages between two nodes keep theirs).
  defp pg_at(w, n, x) do
    {delay, w} = rand(w, 30)
    at = max(w.t + delay, Map.get(w.pg_last, {n, x}, 0))
    {at, put_in(w.pg_last[{n, x}], at)}
  end

  # `n`'s scope learns that `x`'s member left (or that it has one), after a delay.
  defp pg_leave(w, n, x) do
    pg_change(w, n, x, fn w, node ->
      if MapSet.member?(node.pg, x) do
        trace(w, "#{n}'s scope drops #{x}")
        w = put_in(w.nodes[n].pg, MapSet.delete(node.pg, x))
        pg_event(w, n, {:leave, [x], MapSet.to_list(w.nodes[n].pg)})
      else
        w
      end
    end)
  end

  defp pg_join(w, n, x) do
    pg_change(w, n, x, fn w, node ->
      member? = w.nodes[x].alive and w.nodes[x].in_group and w.nodes[x].scope_up

      if node.alive and node.scope_up and member? and MapSet.member?(node.conn, x) and
           not MapSet.member?(node.pg, x) do
        trace(w, "#{n}'s scope adds #{x}")
        w = put_in(w.nodes[n].pg, MapSet.put(node.pg, x))
        pg_event(w, n, {:join, [x]})
      else
        w
      end
    end)
  end

  defp pg_change(w, n, x, change) do
    if w.s.source == :nodes or not w.nodes[n].alive do
      w
    else
      {at, w} = pg_at(w, n, x)
      push(w, at, {:source, fn w -> change.(w, w.nodes[n]) end})
    end
  end

  # Join and leave messages reach a server that monitors the scope as it is now.
  defp pg_event(w, n, event) do
    node = w.nodes[n]

    if node.m != nil and node.m.following == :monitored and node.followed == node.scope,
      do: to_server(w, n, event),
      else: w
  end

  defp to_server(w, n, event), do: push(w, w.t, {:server, n, w.nodes[n].server, event})

  # -- the promises ------------------------------------------------------------------

  defp check(%{violation: nil, s: %{lease: lease}} = w) when lease != nil do
    clocks = Map.new(w.s.nodes, &{&1, clock(w, &1)})

    named =
      for {n, node} <- w.nodes,
          node.alive,
          quorum?(node.view, clocks[n]),
          into: %{},
          do: {n, node.view.members}

    # Since when each member has named itself with quorum without a break. A
    # member removed by `j` breaks the promise only when it has named itself
    # since before `j` first saw it depart: one that stopped and names itself
    # again came back, and races the others' debounce as any join does.
    # A quorum that lapsed since the last check (its `until` passed, then an
    # answer extended it) was broken, though both checks saw it hold.
    broken? = fn n ->
      case w.untils[n] do
        until when is_integer(until) -> until <= clocks[n]
        _ -> false
      end
    end

    since =
      Map.new(w.s.nodes, fn n ->
        cond do
          n not in Map.get(named, n, []) -> {n, nil}
          broken?.(n) -> {n, w.t}
          true -> {n, w.since[n] || w.t}
        end
      end)

    # Since when each node has answered with quorum without a break.
    held_since =
      Map.new(w.s.nodes, fn n ->
        cond do
          not Map.has_key?(named, n) -> {n, nil}
          broken?.(n) -> {n, w.t}
          true -> {n, w.held_since[n] || w.t}
        end
      end)

    untils = Map.new(named, fn {n, _} -> {n, w.nodes[n].view.until} end)
    w = %{w | since: since, held_since: held_since, untils: untils}

    # Only a majority quorum promises one owner: with a smaller one each side of
    # a cut owns keys, as documented.
    majority? = w.s.quorum * 2 > length(w.s.nodes) and Map.get(w.s, :overlap, true)

    overlap =
      for {x, members_x} <- named,
          majority?,
          x in members_x,
          {j, members_j} <- named,
          j != x,
          x not in members_j,
          {inc, at} = w.removed[{j, x}] || {nil, nil},
          inc == w.nodes[x].inc and since[x] <= at and held_since[j] <= at,
          do: "#{x} names itself with quorum while #{j}, with quorum, removed it"

    lapse =
      for {n, members} <- named,
          needed = w.s.quorum - if(n in members, do: 1, else: 0),
          needed > 0,
          heard =
            Enum.count(
              members -- [n],
              &((w.answered[{n, &1}] || -10 ** 12) + lease > clocks[n])
            ),
          heard < needed,
          do:
            "#{n} answers with quorum after its lease lapsed (#{heard} of #{needed} heard)" <>
              if(Process.get(:hrw_sim_trace),
                do:
                  " answered #{inspect(for j <- members, do: w.answered[{n, j}])} clock #{clock(w, n)} " <>
                    "machine #{inspect(w.nodes[n].m.lease.heard)} view #{inspect(w.nodes[n].view)}",
                else: ""
              )

    case overlap ++ lapse do
      [] -> w
      [text | _] -> %{w | violation: {if(overlap == [], do: :lapse, else: :overlap), w.t, text}}
    end
  end

  defp check(w), do: w

  defp quorum?(view, clock) do
    case view do
      %{members: [_ | _], until: until} -> until == :always or until > clock
      _ -> false
    end
  end

  defp settled(w) do
    wrong =
      for n <- w.s.nodes,
          node = w.nodes[n],
          expected =
            Enum.sort(MapSet.to_list(if w.s.source == :nodes, do: node.conn, else: node.pg)),
          node.view == nil or node.view.listed != expected,
          do:
            "#{n} lists #{inspect(node.view && node.view.listed)}, its source #{inspect(expected)}"

    case wrong do
      [] -> :ok
      [text | _] -> {:error, {:settle, w.t, text}}
    end
  end

  # -- reporting -------------------------------------------------------------------

  @doc "A failing schedule without the actions it fails without (greedy), and its failure."
  def shrink(schedule) do
    {:error, failure} = run(schedule)

    Enum.reduce(schedule.actions, {schedule, failure}, fn action, {s, f} ->
      smaller = %{s | actions: List.delete(s.actions, action)}

      case run(smaller) do
        {:error, {kind, _, _} = failure} when kind == elem(f, 0) -> {smaller, failure}
        _ -> {s, f}
      end
    end)
  end
end

defmodule ShardedStore.Machine do
  @moduledoc """
  Every decision of a replica, as a pure function: `step(state, event)` returns the
  new state and the effects the process (`ShardedStore.Replica`) carries out. No
  clock, no message, no process here: time comes in the events, and the test
  suite's simulator (test/support/store_simulator.ex, run by
  test/simulator_test.exs) drives the same function through thousands of orders
  of events: members killed and restarted inside and outside the view's
  departure wait, monitors firing late, messages delayed, reordered, lost and
  duplicated, forged messages.

  A replica is known by its *incarnation* `{node, tag}` (in a process, `tag` is its
  pid): a replica that restarts, alone or with its node, is a new incarnation and
  starts empty.

  Events (anything else, or a part of the wrong shape, is dropped with the effect
  `{:dropped, event}`, and changes nothing):

    * `{:view, snapshot, now}`: the cluster's published snapshot (the process reads
      it itself; a message only says when).
    * `{:write, key, version, value, fingerprint, published_fingerprint, now}`,
      `{:read, key, now}`, `:status`: a client's call, answered by `{:reply, term}`.
    * `{:leave, from, timeout, now}`: leave the store (the process leaves the
      `:pg` group on `:leave_group`); answered by `{:reply_to, from, term}`.
    * `{:handoff, from, ref, entries}` and `{:handoff_ack, ref, node}`: a push of
      another replica and the answer to one of ours.
    * `{:sync, from, ref, now}` and
      `{:sync_reply, from, ref, fingerprint, entries, gone, now}`: a new
      incarnation asks every member for the entries it owns, and the departures
      they saw (`[{node, members, age_ms}]`); an answer is taken only with the
      `ref` of the request outstanding to that member, and counts as done only
      when it was computed in the view the asker has processed (`fingerprint`).
    * `{:peers, incarnations, now}`: the replicas the `:pg` group lists;
      `{:down, incarnation, now}`: one of them ended (its monitor fired).
    * `{:tick, now}`: the periodic retry.

  Effects: `{:reply, term}`, `{:reply_to, from, term}`, `{:send, to, message}`
  (`to` an incarnation, or `{:node, node}` for the replica registered there),
  `{:monitor, incarnation}`, `:leave_group`, `{:dropped, event}`.
  """

  alias ShardedStore.Order

  # How long a push or a sync request waits for its answer before it is sent again.
  @resend 5_000
  # How soon a member whose answer came from another view is asked again.
  @reask 200

  @enforce_keys [:me, :forget, :snapshot]
  defstruct @enforce_keys ++
              [
                data: %{},
                # key => [target node]: pushes still to make.
                pending: %{},
                # target node => {ref, keys, sent at}: pushes sent, not acknowledged.
                inflight: %{},
                leaving: nil,
                # node => {members of the last view with quorum that held it, left at}.
                gone: %{},
                last_members: nil,
                # The members that answered this incarnation's sync request, and
                # when each unanswered one was last asked.
                synced: MapSet.new(),
                asked: %{},
                # The replicas monitored, and the nodes whose last one ended with
                # no other seen since: their keys are pushed to the next owner.
                watching: MapSet.new(),
                down: MapSet.new(),
                seq: 0
              ]

  @type incarnation :: {node(), term()}
  @type t :: %__MODULE__{}

  @doc """
  A new incarnation `me` that has processed `snapshot`, starting empty.
  `forget`: how many ms a departed member counts as possibly holding writes no
  member has.

  ## Examples

      iex> snapshot = ShardedStore.Machine.snapshot([:"a@h", :"b@h"])
      iex> state = ShardedStore.Machine.new({:"a@h", 1}, 5_000, snapshot, 0)
      iex> {_state, effects} = ShardedStore.Machine.step(state, {:tick, 0})
      iex> effects
      [{:send, {:node, :"b@h"}, {:sync, {:"a@h", 1}, {{:"a@h", 1}, 0}}}]
  """
  @spec new(incarnation(), non_neg_integer(), HRW.Cluster.Snapshot.t(), integer()) :: t()
  def new({_node, _tag} = me, forget, snapshot, _now) do
    %__MODULE__{me: me, forget: forget, snapshot: snapshot, last_members: view_members(snapshot)}
  end

  @doc """
  A snapshot of `members` with quorum, as a cluster publishes it (for tests and
  the simulator).

  ## Examples

      iex> ShardedStore.Machine.snapshot([:"b@h", :"a@h"]).members
      [:"a@h", :"b@h"]
  """
  @spec snapshot([node()], boolean(), non_neg_integer()) :: HRW.Cluster.Snapshot.t()
  def snapshot(members, quorum? \\ true, generation \\ 1) do
    members = Enum.sort(members)

    %HRW.Cluster.Snapshot{
      name: ShardedStore.cluster(),
      generation: generation,
      fingerprint: HRW.Cluster.Fingerprint.of(members),
      members: members,
      quorum?: quorum?,
      structure: if(quorum? and members != [], do: HRW.build(members))
    }
  end

  @doc """
  What `status/0` reports: the fingerprint processed, the work still to do (keys
  to push, members not yet asked or answered since this incarnation began) and the
  number of keys held.

  ## Examples

      iex> snapshot = ShardedStore.Machine.snapshot([:"a@h"])
      iex> ShardedStore.Machine.status(ShardedStore.Machine.new({:"a@h", 1}, 0, snapshot, 0))
      {ShardedStore.Machine.snapshot([:"a@h"]).fingerprint, 0, 0}
  """
  @spec status(t()) :: {non_neg_integer(), non_neg_integer(), non_neg_integer()}
  def status(state) do
    {state.snapshot.fingerprint, map_size(state.pending) + length(unsynced(state)),
     map_size(state.data)}
  end

  @doc """
  One event: the new state and the effects, in order. Never raises.

  ## Examples

      iex> snapshot = ShardedStore.Machine.snapshot([:"a@h"])
      iex> state = ShardedStore.Machine.new({:"a@h", 1}, 0, snapshot, 0)
      iex> ShardedStore.Machine.step(state, {:hrw_cluster_snapshot, :sharded_store, nil, :junk})
      ...> |> elem(1)
      [{:dropped, {:hrw_cluster_snapshot, :sharded_store, nil, :junk}}]
  """
  @spec step(t(), term()) :: {t(), [term()]}
  def step(state, event) do
    if valid?(event), do: handle(state, event), else: {state, [{:dropped, event}]}
  end

  # -- the shapes taken ---------------------------------------------------------

  defp valid?({:view, %HRW.Cluster.Snapshot{} = s, now}),
    do: is_integer(now) and is_integer(s.fingerprint) and nodes?(s.members)

  defp valid?({:write, _key, version, _value, fp, published, now}),
    do:
      is_integer(version) and is_integer(fp) and is_integer(now) and
        (published == nil or is_integer(published))

  defp valid?({:read, _key, now}), do: is_integer(now)
  defp valid?(:status), do: true

  defp valid?({:leave, _from, timeout, now}),
    do: is_integer(timeout) and timeout >= 0 and is_integer(now)

  defp valid?({:handoff, from, _ref, entries}), do: incarnation?(from) and is_map(entries)
  defp valid?({:handoff_ack, _ref, node}), do: is_atom(node)
  defp valid?({:sync, from, _ref, now}), do: incarnation?(from) and is_integer(now)

  defp valid?({:sync_reply, from, _ref, fingerprint, entries, gone, now}),
    do:
      incarnation?(from) and is_integer(fingerprint) and is_map(entries) and is_list(gone) and
        is_integer(now)

  defp valid?({:peers, peers, now}),
    do: is_integer(now) and is_list(peers) and Enum.all?(peers, &incarnation?/1)

  defp valid?({:down, incarnation, now}), do: is_integer(now) and incarnation?(incarnation)
  defp valid?({:tick, now}), do: is_integer(now)
  defp valid?(_event), do: false

  defp incarnation?({node, _tag}), do: is_atom(node)
  defp incarnation?(_), do: false

  defp nodes?(list), do: is_list(list) and Enum.all?(list, &is_atom/1)

  # The library's rule for keys: a term it can hash.
  defp key?(key) do
    _ = HRW.term_id(key)
    true
  rescue
    ArgumentError -> false
  end

  # -- events ---------------------------------------------------------------------

  defp handle(state, {:view, new, now}) do
    if new.fingerprint === state.snapshot.fingerprint and
         new.quorum? === state.snapshot.quorum? and new.members === state.snapshot.members do
      {state, []}
    else
      # Handoff from the snapshot this replica last processed (the one its writes
      # were taken under) to the new one. Pushes in flight were addressed under
      # the old view (some perhaps across a link that was down): the pending keys
      # are sent again under the new one.
      later = departures(%{state | snapshot: new, inflight: %{}}, state.snapshot, new, now)
      work(retarget(state, later), now)
    end
  end

  defp handle(state, {:write, key, version, value, fingerprint, published, now}) do
    case key?(key) and writable(state, key, fingerprint, published, now) do
      :ok ->
        case take(Map.get(state.data, key), {version, value}) do
          :take -> {%{state | data: Map.put(state.data, key, {version, value})}, [{:reply, :ok}]}
          :held -> {state, [{:reply, :ok}]}
          refusal -> {state, [{:reply, {:error, refusal}}]}
        end

      false ->
        {state, [{:reply, {:error, :bad_key}}]}

      refusal ->
        {state, [{:reply, {:error, refusal}}]}
    end
  end

  # With the snapshot this replica has processed, so the reader can tell whether
  # every member answered from the same view.
  defp handle(state, {:read, key, now}) do
    if key?(key) do
      entry = Map.get(state.data, key)
      {state, [{:reply, {:entry, state.snapshot.fingerprint, entry, cut_off?(state, key, now)}}]}
    else
      {state, [{:reply, {:error, :bad_key}}]}
    end
  end

  defp handle(state, :status), do: {state, [{:reply, status(state)}]}

  defp handle(%{leaving: nil} = state, {:leave, from, timeout, now}) do
    {state, effects} = finish_leave(%{state | leaving: {from, now + timeout}}, now)
    {state, [:leave_group | effects]}
  end

  defp handle(%{leaving: :left} = state, {:leave, from, _timeout, _now}),
    do: {state, [{:reply_to, from, :ok}]}

  defp handle(state, {:leave, from, _timeout, _now}),
    do: {state, [{:reply_to, from, {:error, :leaving}}]}

  # Entries sent by another replica's handoff: any malformed one is dropped.
  defp handle(state, {:handoff, from, ref, entries}) do
    {%{state | data: merge_all(state.data, entries)},
     [{:send, from, {:handoff_ack, ref, me_node(state)}}]}
  end

  defp handle(state, {:handoff_ack, ref, target}) do
    case state.inflight do
      %{^target => {^ref, keys, _at}} ->
        pending =
          Enum.reduce(keys, state.pending, fn key, pending ->
            case pending do
              %{^key => targets} ->
                left = List.delete(targets, target)
                if left == [], do: Map.delete(pending, key), else: Map.put(pending, key, left)

              _ ->
                pending
            end
          end)

        {state, effects} = finish_leave(%{state | pending: pending}, nil)
        {%{state | inflight: Map.delete(state.inflight, target)}, effects}

      _ ->
        {state, []}
    end
  end

  # A new incarnation asks for what it owns: the entries held here that it owns
  # in this replica's view (a later change of view pushes the moves as usual),
  # and the departures seen here, by age, so that it refuses what they refuse.
  # Its request is also news that it runs: seen as the :pg group would show it.
  defp handle(state, {:sync, {requester, _} = from, ref, now}) do
    {state, effects} = handle(state, {:peers, [from], now})

    entries =
      for {key, entry} <- state.data,
          requester in owners(state.snapshot, key) or requester in targets(state, key),
          into: %{},
          do: {key, entry}

    answer =
      {:sync_reply, state.me, ref, state.snapshot.fingerprint, entries, gone_list(state, now)}

    {state, effects ++ [{:send, from, answer}]}
  end

  # An answer computed in another view than this replica's may lack keys this
  # replica owns (the answerer did not count it an owner there): its entries are
  # kept, and the member is asked again.
  defp handle(state, {:sync_reply, {peer, _}, ref, fingerprint, entries, gone, now}) do
    case state.asked do
      %{^peer => {_at, ^ref}} ->
        state = %{
          state
          | data: merge_all(state.data, entries),
            gone: merge_gone(state, gone, now)
        }

        if fingerprint === state.snapshot.fingerprint do
          synced = MapSet.put(state.synced, peer)
          finish_leave(%{state | synced: synced, asked: Map.delete(state.asked, peer)}, now)
        else
          # Asked again @reask ms from now (views converge within a few ms).
          {%{state | asked: Map.put(state.asked, peer, {now - @resend + @reask, ref})}, []}
        end

      _ ->
        {state, []}
    end
  end

  # The replicas the :pg group lists: each new one is monitored; a node seen with
  # a new one came back (it asks for its keys itself, and it gets back the keys
  # that stood in for it), so what was in flight to it is sent again, and it is
  # asked again if it has not answered.
  defp handle(state, {:peers, peers, now}) do
    fresh = Enum.reject(Enum.uniq(peers), &(&1 in state.watching or &1 == state.me))
    back = fresh |> Enum.map(&elem(&1, 0)) |> Enum.uniq()

    later = %{
      state
      | watching: Enum.into(fresh, state.watching),
        down: Enum.reduce(back, state.down, &MapSet.delete(&2, &1)),
        inflight: Map.drop(state.inflight, back),
        asked: Map.drop(state.asked, back)
    }

    # Targets change only when a node whose replica had ended is back.
    later = if Enum.any?(back, &(&1 in state.down)), do: retarget(state, later), else: later
    {state, effects} = work(later, now)
    {state, Enum.map(fresh, &{:monitor, &1}) ++ effects}
  end

  # A monitored replica ended. When it was its node's last, the keys it held a
  # copy of are pushed to the next owner at once, without waiting for the view
  # to drop the node (with a lease that waits the lease): one copy lasts until
  # that push is acknowledged, not until the view changes.
  defp handle(state, {:down, {node, _} = incarnation, now}) do
    if incarnation in state.watching do
      watching = MapSet.delete(state.watching, incarnation)
      state = %{state | watching: watching}

      if Enum.any?(watching, &(elem(&1, 0) == node)) do
        {state, []}
      else
        later = %{
          state
          | down: MapSet.put(state.down, node),
            inflight: Map.delete(state.inflight, node)
        }

        work(retarget(state, later), now)
      end
    else
      {state, []}
    end
  end

  defp handle(state, {:tick, now}), do: work(state, now)

  # -- writes -----------------------------------------------------------------------

  # A write is taken when the snapshot processed (so the handoff of any change
  # after it carries this write) and the one published now (a nodedown is
  # published before the replica hears of it) are both the writer's, this node
  # is an owner there, no owner's replica is known to have ended, and the key's
  # two owners did not both leave within
  # `forget` (they may hold a higher version: the rule reads follow).
  defp writable(state, key, fingerprint, published, now) do
    snapshot = state.snapshot

    cond do
      state.leaving !== nil or not snapshot.quorum? or snapshot.fingerprint !== fingerprint or
          published !== fingerprint ->
        :wrong_view

      me_node(state) not in owners(snapshot, key) ->
        :wrong_view

      # An owner whose replica ended: the other copy is already pushed to the
      # next owner, and a write taken here now would reach neither.
      Enum.any?(owners(snapshot, key), &(&1 in state.down)) ->
        :owner_down

      cut_off?(state, key, now) ->
        :unavailable

      true ->
        :ok
    end
  end

  # What a write does to the entry held: entries are ordered by version, then by
  # value (`ShardedStore.Order`: term order, where 1 and 1.0 differ), the same on
  # every replica, so two values written with one version end the same everywhere
  # whatever the order they arrive in.
  defp take(nil, _entry), do: :take
  defp take(held, held), do: :held
  defp take({held, _}, {version, _}) when version < held, do: {:stale, held}

  defp take({version, held}, {version, value}) do
    if Order.compare(held, value) == :gt, do: {:conflict, held}, else: :take
  end

  defp take(_held, _entry), do: :take

  defp merge_all(data, entries) do
    Enum.reduce(entries, data, fn
      {key, {version, _value} = entry}, data when is_integer(version) ->
        if key?(key), do: merge(data, key, entry), else: data

      _, data ->
        data
    end)
  end

  defp merge(data, key, entry) do
    case data do
      %{^key => held} ->
        if Order.compare(entry, held) == :gt, do: Map.put(data, key, entry), else: data

      _ ->
        Map.put(data, key, entry)
    end
  end

  # -- departures -------------------------------------------------------------------

  defp departures(state, old, new, now) do
    members = view_members(old) || state.last_members
    left = if members == nil, do: [], else: old.members -- new.members

    gone =
      state.gone
      |> Map.drop(new.members)
      |> Map.reject(fn {_node, {_members, at}} -> now - at > state.forget end)
      |> Map.merge(Map.new(left, &{&1, {members, now}}))

    %{state | gone: gone, last_members: view_members(new) || members}
  end

  # The members of a view with quorum, nil without.
  defp view_members(%{structure: nil}), do: nil
  defp view_members(%{members: members}), do: members

  # Both owners of `key`, in the last view that held one of the departed members,
  # departed within `forget` ms: they may hold writes no member has.
  defp cut_off?(%{gone: gone, forget: forget}, key, now) do
    recent = for {node, {_, at}} <- gone, now - at <= forget, into: MapSet.new(), do: node

    Enum.any?(gone, fn {node, {members, _at}} ->
      node in recent and Enum.all?(list_owners(members, key), &(&1 in recent))
    end)
  end

  # Ages cross nodes, times do not (each node's monotonic clock is its own).
  defp gone_list(state, now) do
    for {node, {members, at}} <- state.gone,
        now - at <= state.forget,
        do: {node, members, max(now - at, 0)}
  end

  # Departures a peer saw, by age: kept when this replica's view does not hold
  # the node and it has no record of its own.
  defp merge_gone(state, gone, now) do
    Enum.reduce(gone, state.gone, fn
      {node, members, age}, acc when is_atom(node) and is_integer(age) and age >= 0 ->
        if nodes?(members) and age <= state.forget and node not in state.snapshot.members and
             not Map.has_key?(acc, node),
           do: Map.put(acc, node, {members, now - age}),
           else: acc

      _, acc ->
        acc
    end)
  end

  # -- pushes -------------------------------------------------------------------------

  # One rule for every change of where copies go (a view processed, a replica
  # ended, one came back): each key held is pushed to the targets it has in
  # `later` and did not have in `before` (they may not hold it). Any holder
  # pushes, owner or not: a copy is never dropped, and merges are idempotent.
  defp retarget(before, later) do
    pending =
      Enum.reduce(later.data, later.pending, fn {key, _entry}, pending ->
        add(pending, key, targets(later, key) -- targets(before, key))
      end)

    %{later | pending: pending}
  end

  defp add(pending, _key, []), do: pending

  defp add(pending, key, targets),
    do: Map.update(pending, key, targets, &Enum.uniq(&1 ++ targets))

  # Where a key's copies go: its two owners in the view processed, skipping the
  # nodes whose replica ended (the next owner stands in).
  defp targets(state, key) do
    case state.snapshot.structure do
      nil ->
        []

      structure ->
        key
        |> HRW.owners(structure, 2 + MapSet.size(state.down))
        |> Enum.reject(&(&1 in state.down))
        |> Enum.take(2)
    end
  end

  # The pushes, the sync requests and the end of a leave.
  defp work(state, now) do
    {state, pushes} = push(state, now)
    {state, asks} = ask(state, now)
    {state, leave} = finish_leave(state, now)
    {state, pushes ++ asks ++ leave}
  end

  # Pushes the pending keys, one message per target, without waiting (two replicas
  # may push to each other); a target's keys stay pending until it acknowledges
  # them, are sent again when it has not within @resend ms, and are dropped once it
  # is no longer where a copy goes.
  defp push(state, now) do
    me = me_node(state)

    pending =
      for {key, targets} <- state.pending,
          left = Enum.filter(targets, &(&1 != me and &1 in targets(state, key))),
          left != [],
          into: %{},
          do: {key, left}

    inflight =
      Map.reject(state.inflight, fn {_target, {_ref, _keys, at}} -> now - at > @resend end)

    by_target =
      for {key, targets} <- pending,
          target <- targets,
          not Map.has_key?(inflight, target),
          reduce: %{} do
        acc -> Map.update(acc, target, [key], &[key | &1])
      end

    {state, inflight, effects} =
      Enum.reduce(by_target, {state, inflight, []}, fn {target, keys}, {state, inflight, fx} ->
        ref = {state.me, state.seq}
        message = {:handoff, state.me, ref, Map.take(state.data, keys)}

        {%{state | seq: state.seq + 1}, Map.put(inflight, target, {ref, keys, now}),
         [{:send, {:node, target}, message} | fx]}
      end)

    {%{state | pending: pending, inflight: inflight}, Enum.reverse(effects)}
  end

  # The members this incarnation has not heard from since it began.
  defp unsynced(state) do
    Enum.reject(state.snapshot.members, &(&1 == me_node(state) or &1 in state.synced))
  end

  defp ask(state, now) do
    due =
      Enum.filter(unsynced(state), fn node ->
        case state.asked do
          %{^node => {at, _ref}} -> now - at > @resend
          _ -> true
        end
      end)

    Enum.reduce(due, {state, []}, fn node, {state, effects} ->
      ref = {state.me, state.seq}

      {%{state | asked: Map.put(state.asked, node, {now, ref}), seq: state.seq + 1},
       effects ++ [{:send, {:node, node}, {:sync, state.me, ref}}]}
    end)
  end

  defp finish_leave(%{leaving: leaving} = state, _now) when leaving in [nil, :left],
    do: {state, []}

  defp finish_leave(%{leaving: {from, deadline}} = state, now) do
    cond do
      state.pending == %{} and me_node(state) not in state.snapshot.members ->
        {%{state | leaving: :left}, [{:reply_to, from, :ok}]}

      now != nil and now > deadline ->
        {%{state | leaving: :left}, [{:reply_to, from, {:error, :timeout}}]}

      true ->
        {state, []}
    end
  end

  defp me_node(%{me: {node, _}}), do: node

  # The key's two owners in a snapshot's structure; none without one.
  defp owners(%{structure: nil}, _key), do: []
  defp owners(%{structure: structure}, key), do: HRW.owners(key, structure, 2)

  defp list_owners(nil, _key), do: []
  defp list_owners([], _key), do: []
  defp list_owners(members, key), do: HRW.owners(key, members, 2)
end

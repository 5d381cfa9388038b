defmodule HRW.Cluster.Lease do
  @moduledoc false
  # The `:lease` option of `HRW.Cluster` (see docs/CLUSTER.md, "Silent partitions
  # and the lease"): with a lease of `ms`, a server counts toward its quorum itself
  # and the members whose server of the same name answered one of its heartbeats
  # sent less than `ms` ago.
  #
  # Every `period` (`ms` / 3) the server sends a heartbeat to the server of the
  # same name on each other member. Each heartbeat carries a token of its own, a
  # random 64-bit integer that the server records with the member it went to and
  # its own monotonic clock at the send (the stamp); that server answers at once
  # with the token (every server answers, with or without a lease). An answer
  # proves a round trip after the stamp of the heartbeat its token names, so that
  # member counts until the stamp plus `ms`. An answer is worth only its token:
  # the stamp is this server's own, so no message can carry a time into it, and an
  # answer whose token this server did not send (to that member, within the
  # lease) counts for nothing. Whatever happens to the links at time T, an answer
  # to a heartbeat sent before T counts until T + ms at the latest, so a server
  # cut off at T stops counting those members by T + ms, whatever the period. The
  # period sets how fresh the newest answer is while the links work (at most a
  # period plus a round trip old) and so what the lease tolerates: a member stops
  # counting without a cut only when none of the three heartbeats of the last
  # lease has been answered, so one lost heartbeat, or answers up to two periods
  # late, lapse nothing.
  #
  # The server calls `check/3` whenever the members change, a heartbeat round
  # starts, its lapse timer fires or an answer may have restored the quorum: it
  # says whether the quorum holds now and until when, and arms one timer for the
  # moment it would lapse, so a lapse is published when it falls due, not at the
  # next heartbeat. The timers are the server's own (`:erlang.start_timer/3`): a
  # timer message counts only when it carries the reference of the timer armed
  # last, so a forged one does nothing. A member that leaves (or whose departure
  # is seen, `forget/2`) is forgotten with its tokens: it counts again only from
  # an answer to a heartbeat sent after it came back. Sends never connect
  # (`:noconnect`) and never wait for a busy link (`:nosuspend`): a silent link
  # delays no heartbeat to the others.

  @tag :"$hrw_lease"
  @tick :"$hrw_lease_tick"
  @lapse :"$hrw_lease_lapse"
  @token_range 0xFFFF_FFFF_FFFF_FFFF

  defstruct [:ms, :period, :server, :tick, :lapse, nodes: [], heard: %{}, sent: %{}, held: false]

  @typedoc """
  A server's lease: its length and period in ms, the server's registered name (the
  same on every member), its tick and lapse timers, the members as of the last
  check, when each answered last (the stamp of the newest heartbeat answered, this
  node's monotonic ms), the heartbeats sent within the lease (token => {member,
  stamp}), and whether the quorum held at the last check.
  """
  @type t :: %__MODULE__{
          ms: pos_integer(),
          period: pos_integer(),
          server: atom(),
          tick: reference() | nil,
          lapse: reference() | nil,
          nodes: [node()],
          heard: %{optional(node()) => integer()},
          sent: %{optional(non_neg_integer()) => {node(), integer()}},
          held: boolean()
        }

  @doc "Matches the heartbeats and answers of a lease (any server's)."
  defmacro message, do: quote(do: {unquote(@tag), _, _, _})

  @doc "Whether `kind` is the message of a lease's own timer (`{:timeout, ref, kind}`)."
  defguard is_timer(kind) when kind in [@tick, @lapse]

  @doc """
  A lease of `ms` for the server registered as `server`, or `nil` without one. Runs
  in the server: the first heartbeats go out at once.
  """
  @spec new(pos_integer() | nil, atom()) :: t() | nil
  def new(nil, _server), do: nil

  def new(ms, server) do
    tick = :erlang.start_timer(0, self(), @tick)
    %__MODULE__{ms: ms, period: max(div(ms, 3), 1), server: server, tick: tick}
  end

  @doc """
  Handles a lease `message` in the server: answers a heartbeat, records an
  answer, sends the next heartbeats when its own tick timer fires. Returns the
  lease and whether the quorum may have changed (`check/3` tells).
  """
  @spec handle(tuple(), t() | nil) :: {t() | nil, boolean()}
  def handle({@tag, :ping, from, token}, lease) when is_pid(from) do
    _ = :erlang.send(from, {@tag, :pong, self(), token}, [:noconnect, :nosuspend])
    {lease, false}
  end

  def handle(_message, nil), do: {nil, false}

  # While the quorum holds, its lapse timer is armed and each round re-checks it:
  # an answer then only postpones the lapse.
  def handle({@tag, :pong, _from, token}, lease) do
    case Map.pop(lease.sent, token) do
      {{node, stamp}, sent} ->
        lease = %{lease | sent: sent}

        if fresh?(lease, stamp),
          do: {heard(lease, node, stamp), not lease.held},
          else: {lease, false}

      {nil, _sent} ->
        {lease, false}
    end
  end

  def handle({:timeout, ref, @tick}, %{tick: ref} = lease) do
    tick = :erlang.start_timer(lease.period, self(), @tick)
    stamp = now()

    sent =
      for {_token, {_node, at}} = entry <- lease.sent, at + lease.ms > stamp, into: %{}, do: entry

    sent =
      Enum.reduce(lease.nodes, sent, fn
        node, sent when node == node() ->
          sent

        node, sent ->
          token = :rand.uniform(@token_range)
          ping = {@tag, :ping, self(), token}
          _ = :erlang.send({lease.server, node}, ping, [:noconnect, :nosuspend])
          Map.put(sent, token, {node, stamp})
      end)

    {%{lease | tick: tick, sent: sent}, true}
  end

  def handle({:timeout, ref, @lapse}, %{lapse: ref} = lease) when is_reference(ref),
    do: {%{lease | lapse: nil}, true}

  def handle(_message, lease), do: {lease, false}

  defp fresh?(lease, stamp), do: stamp + lease.ms > now()

  @doc """
  Records that `node` answered the heartbeat stamped `stamp` (answers may arrive
  out of order: the newest stamp counts).
  """
  @spec heard(t(), node(), integer()) :: t()
  def heard(lease, node, stamp),
    do: %{lease | heard: Map.update(lease.heard, node, stamp, &max(&1, stamp))}

  @doc """
  Forgets what `nodes` answered and the heartbeats sent to them: they count again
  only from an answer to a heartbeat sent later (a departure the server has seen,
  whether or not the members list them still).
  """
  @spec forget(t() | nil, [node()]) :: t() | nil
  def forget(nil, _nodes), do: nil

  def forget(lease, nodes) do
    sent = for {_token, {node, _}} = entry <- lease.sent, node not in nodes, into: %{}, do: entry
    %{lease | heard: Map.drop(lease.heard, nodes), sent: sent}
  end

  @doc """
  Whether the members `nodes` reach `quorum` now, until when (see `until/3`;
  `:always` without a lease), and the lease that heartbeats them, its lapse timer
  armed (without a lease: whether there are `quorum` of them, and `nil`). Members
  that are no longer among `nodes` are forgotten (`forget/2`).
  """
  @spec check(t() | nil, [node()], pos_integer()) ::
          {boolean(), :always | integer() | nil, t() | nil}
  def check(nil, nodes, quorum), do: {length(nodes) >= quorum, :always, nil}

  def check(lease, nodes, quorum) do
    lease = forget(lease, lease.nodes -- nodes)
    now = now()
    until = until(lease, nodes, quorum)
    held = held?(until, now)
    _ = if lease.lapse, do: :erlang.cancel_timer(lease.lapse)

    # `until` is at most the newest stamp plus the lease: the timer is at most
    # `ms` away, whatever a message said.
    lapse = if held and is_integer(until), do: :erlang.start_timer(until - now, self(), @lapse)

    {held, until, %{lease | nodes: nodes, held: held, lapse: lapse}}
  end

  @doc """
  Until when the members `nodes` reach `quorum` with what has been heard so far:
  `:always` when this node alone reaches it, `nil` when they do not, else the
  monotonic ms at which the quorum lapses unless more answers arrive (it holds
  while the clock is below it).
  """
  @spec until(t(), [node()], pos_integer()) :: :always | integer() | nil
  def until(lease, nodes, quorum) do
    local = if node() in nodes, do: 1, else: 0

    expiries =
      for node <- nodes,
          node != node(),
          stamp = lease.heard[node],
          stamp != nil,
          do: stamp + lease.ms

    needed = quorum - local

    cond do
      needed <= 0 -> :always
      length(expiries) < needed -> nil
      # The quorum holds while `needed` members still count: until the lapse of
      # the `needed`-th freshest answer.
      true -> expiries |> Enum.sort(:desc) |> Enum.at(needed - 1)
    end
  end

  @doc "Whether a quorum that holds `until` (see `until/3`) holds at `now`."
  @spec held?(:always | integer() | nil, integer()) :: boolean()
  def held?(:always, _now), do: true
  def held?(nil, _now), do: false
  def held?(until, now), do: until > now

  @doc """
  How long after it sees a member depart a server with a lease of `ms` keeps that
  member's keys where they are: the member's own quorum lapses within `ms` of
  the last heartbeat it had answered, which precedes the departure, by its own
  clock; two clocks corrected by the VM differ in rate by at most 2% (1% each),
  hence the margin.
  """
  @spec hold(pos_integer()) :: pos_integer()
  def hold(ms), do: ms + div(ms, 50) + 1

  defp now, do: :erlang.monotonic_time(:millisecond)
end

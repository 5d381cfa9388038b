defmodule HRW.Cluster.Lease do
  @moduledoc false
  # The `:lease` option of `HRW.Cluster` (see docs/CLUSTER.md, "Silent partitions
  # and the lease"): with a lease of `ms`, a server counts toward its quorum itself
  # and the members whose server of the same name answered one of its heartbeats
  # sent less than `ms` ago.
  #
  # Every `period` (`ms` / 3) the server sends a heartbeat to the server of the
  # same name on each other member, stamped with its own monotonic clock; that
  # server answers at once with the stamp (every server answers, with or without a
  # lease). An answer to the heartbeat stamped `t` proves a round trip after `t`,
  # so the member counts until `t + ms`. No other clock is read and no message is
  # trusted for a time it did not carry: whatever happens to the links at time T,
  # an answer stamped before T counts until T + ms at the latest, so a server cut
  # off at T stops counting those members by T + ms, whatever the period. The
  # period sets how fresh the newest answer is while the links work (at most a
  # period plus a round trip old) and so what the lease tolerates: a member stops
  # counting without a cut only when none of the three heartbeats of the last
  # lease has been answered, so one lost heartbeat, or answers up to two periods
  # late, lapse nothing.
  #
  # The server calls `check/3` whenever the members change, its lapse timer fires
  # or an answer may have restored the quorum: it says whether the quorum holds
  # now and arms one timer for the moment it would lapse, so a lapse is published
  # when it falls due, not at the next heartbeat. Sends never connect
  # (`:noconnect`) and never wait for a busy link (`:nosuspend`): a silent link
  # delays no heartbeat to the others.

  @tag :"$hrw_lease"

  defstruct [:ms, :period, :server, nodes: [], heard: %{}, held: false, timer: nil]

  @typedoc """
  A server's lease: its length and period in ms, the server's registered name (the
  same on every member), the members as of the last check, when each answered
  last (the stamp of the heartbeat answered, this node's monotonic ms), whether
  the quorum held at the last check, and the timer of its lapse.
  """
  @type t :: %__MODULE__{
          ms: pos_integer(),
          period: pos_integer(),
          server: atom(),
          nodes: [node()],
          heard: %{optional(node()) => integer()},
          held: boolean(),
          timer: reference() | nil
        }

  @doc "Matches every message of a lease: heartbeats, answers and its own timers."
  defmacro message, do: quote(do: {unquote(@tag), _, _, _})

  @doc """
  A lease of `ms` for the server registered as `server`, or `nil` without one. Runs
  in the server: the first heartbeats go out at once.
  """
  @spec new(pos_integer() | nil, atom()) :: t() | nil
  def new(nil, _server), do: nil

  def new(ms, server) do
    send(self(), {@tag, :tick, nil, nil})
    %__MODULE__{ms: ms, period: max(div(ms, 3), 1), server: server}
  end

  @doc """
  Handles a lease `message` in the server: answers a heartbeat, records an
  answer, sends the next heartbeats. Returns the lease and whether the quorum may
  have changed (`check/3` tells).
  """
  @spec handle(tuple(), t() | nil) :: {t() | nil, boolean()}
  def handle({@tag, :ping, from, stamp}, lease) when is_pid(from) do
    _ = :erlang.send(from, {@tag, :pong, self(), stamp}, [:noconnect, :nosuspend])
    {lease, false}
  end

  def handle({@tag, _kind, _from, _stamp}, nil), do: {nil, false}

  # While the quorum holds, its lapse timer is armed: an answer only postpones the
  # lapse, which the timer re-checks then.
  def handle({@tag, :pong, from, stamp}, lease) when is_pid(from) and is_integer(stamp) do
    lease = heard(lease, node(from), stamp)
    {lease, not lease.held}
  end

  def handle({@tag, :tick, _, _}, lease) do
    Process.send_after(self(), {@tag, :tick, nil, nil}, lease.period)
    ping = {@tag, :ping, self(), System.monotonic_time(:millisecond)}

    for node <- lease.nodes, node != node() do
      :erlang.send({lease.server, node}, ping, [:noconnect, :nosuspend])
    end

    # Members that left are forgotten: one that comes back must answer anew.
    {%{lease | heard: Map.take(lease.heard, lease.nodes)}, false}
  end

  def handle({@tag, :lapse, _, _}, lease), do: {lease, true}
  def handle({@tag, _kind, _from, _stamp}, lease), do: {lease, false}

  @doc """
  Records that `node` answered the heartbeat stamped `stamp` (answers may arrive
  out of order: the newest stamp counts).
  """
  @spec heard(t(), node(), integer()) :: t()
  def heard(lease, node, stamp),
    do: %{lease | heard: Map.update(lease.heard, node, stamp, &max(&1, stamp))}

  @doc """
  Whether the members `nodes` reach `quorum` now, and the lease that heartbeats
  them, its lapse timer armed (without a lease: whether there are `quorum` of
  them, and `nil`).
  """
  @spec check(t() | nil, [node()], pos_integer()) :: {boolean(), t() | nil}
  def check(nil, nodes, quorum), do: {length(nodes) >= quorum, nil}

  def check(lease, nodes, quorum) do
    now = System.monotonic_time(:millisecond)
    until = until(lease, nodes, quorum)
    held = held?(until, now)
    _ = if lease.timer, do: Process.cancel_timer(lease.timer)

    timer =
      if held and is_integer(until),
        do: Process.send_after(self(), {@tag, :lapse, nil, nil}, until - now)

    {held, %{lease | nodes: nodes, held: held, timer: timer}}
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
end

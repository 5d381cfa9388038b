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
  # The lease is pure (`HRW.Cluster.Machine` drives it): `tick/2` says which
  # heartbeats to send, `answer/3` records an answer, and `check/4`, called
  # whenever the members change, a round starts, the lapse timer fires or an
  # answer may have restored the quorum, says whether the quorum holds and until
  # when; the machine arms one timer for that moment, so a lapse is published when
  # it falls due, not at the next heartbeat. A member that leaves (or whose
  # departure is seen, `forget/2`) is forgotten with its tokens: it counts again
  # only from an answer to a heartbeat sent after it came back. The server sends
  # without connecting (`:noconnect`) or waiting for a busy link (`:nosuspend`):
  # a silent link delays no heartbeat to the others.

  @token_range 0xFFFF_FFFF_FFFF_FFFF

  defstruct [:ms, :period, :self, :rand, nodes: [], heard: %{}, sent: %{}, held: false]

  @typedoc """
  A server's lease: its length and period in ms, the node it runs on, the state of
  its token generator, the members as of the last check, when each answered last
  (the stamp of the newest heartbeat answered, this node's monotonic ms), the
  heartbeats sent within the lease (token => {member, stamp}), and whether the
  quorum held at the last check.
  """
  @type t :: %__MODULE__{
          ms: pos_integer(),
          period: pos_integer(),
          self: node(),
          rand: :rand.state(),
          nodes: [node()],
          heard: %{optional(node()) => integer()},
          sent: %{optional(non_neg_integer()) => {node(), integer()}},
          held: false | true
        }

  @doc """
  A lease of `ms` for a server on `self`, or `nil` without one; `seed` seeds its
  tokens (the server gives a random one, a simulation a fixed one).
  """
  @spec new(pos_integer() | nil, node(), integer()) :: t() | nil
  def new(nil, _self, _seed), do: nil

  def new(ms, self, seed) do
    rand = :rand.seed_s(:exsss, seed)
    %__MODULE__{ms: ms, period: max(div(ms, 3), 1), self: self, rand: rand}
  end

  @doc """
  A heartbeat round at `now`: the heartbeats to send, `{member, token}`, one to
  each other member, recorded with `now` as their stamp.
  """
  @spec tick(t(), integer()) :: {t(), [{node(), non_neg_integer()}]}
  def tick(lease, now) do
    sent =
      for {_token, {_node, at}} = entry <- lease.sent, at + lease.ms > now, into: %{}, do: entry

    {pings, sent, rand} =
      Enum.reduce(lease.nodes -- [lease.self], {[], sent, lease.rand}, fn node,
                                                                          {pings, sent, rand} ->
        {token, rand} = :rand.uniform_s(@token_range, rand)
        {[{node, token} | pings], Map.put(sent, token, {node, now}), rand}
      end)

    {%{lease | sent: sent, rand: rand}, Enum.reverse(pings)}
  end

  @doc """
  Records an answer carrying `token` at `now`. Returns the lease and whether the
  quorum may have come back (`check/4` tells): an answer counts only by the token
  of a heartbeat this lease sent within the lease, once. While the quorum holds an
  answer only postpones its lapse.
  """
  @spec answer(t(), term(), integer()) :: {t(), boolean()}
  def answer(lease, token, now) do
    case Map.pop(lease.sent, token) do
      {{node, stamp}, sent} ->
        lease = %{lease | sent: sent}

        if stamp + lease.ms > now,
          do: {heard(lease, node, stamp), not lease.held},
          else: {lease, false}

      {nil, _sent} ->
        {lease, false}
    end
  end

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
  Whether the members `nodes` reach `quorum` at `now`, until when (see `until/3`),
  and the lease as of this check. Members that are no longer among `nodes` are
  forgotten (`forget/2`). The caller arms its lapse timer for `until`.
  """
  @spec check(t(), [node()], pos_integer(), integer()) ::
          {boolean(), :always | integer() | nil, t()}
  def check(lease, nodes, quorum, now) do
    lease = forget(lease, lease.nodes -- nodes)
    until = until(lease, nodes, quorum)
    held = held?(until, now)
    {held, until, %{lease | nodes: nodes, held: held}}
  end

  @doc """
  Until when the members `nodes` reach `quorum` with what has been heard so far:
  `:always` when this node alone reaches it, `nil` when they do not, else the
  monotonic ms at which the quorum lapses unless more answers arrive (it holds
  while the clock is below it).
  """
  @spec until(t(), [node()], pos_integer()) :: :always | integer() | nil
  def until(lease, nodes, quorum) do
    local = if lease.self in nodes, do: 1, else: 0

    expiries =
      for node <- nodes,
          node != lease.self,
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
end

# Runs inside a :peer node (loaded there from this binary): every public entry
# point, on structures built before the code operations, in processes that loop
# through them while the test reloads HRW.Native.
{:module, HRW.ReloadDriver, driver_beam, _} =
  defmodule HRW.ReloadDriver do
    @moduledoc false
    @nodes Enum.map(1..40, &"node-#{&1}")
    @weighted Enum.map(1..40, &{"node-#{&1}", rem(&1, 5) + 1})
    @keys Enum.map(1..300, &{:user, &1})

    # The structures a running system holds: built once, used by every process.
    def fixtures do
      %{
        ring: HRW.Ring.new(@nodes),
        skeleton: HRW.build(@nodes),
        weighted: HRW.Ring.new(@weighted, scorer: %HRW.Weighted{}),
        bigger: HRW.build(["extra" | @nodes])
      }
    end

    # One round through every entry point; the answers are plain data, so two
    # rounds compare with ==. Builds run too: a reload must not break them.
    def run_all(f) do
      [
        Enum.map(@keys, &HRW.owner(&1, @nodes)),
        Enum.map(@keys, &HRW.owner(&1, f.ring)),
        Enum.map(@keys, &HRW.owner(&1, f.skeleton)),
        Enum.map(@keys, &HRW.owner(&1, @weighted, scorer: %HRW.Weighted{})),
        Enum.map(@keys, &HRW.owner(&1, f.weighted)),
        HRW.owners({:user, 7}, @nodes, 3),
        HRW.owners({:user, 7}, f.ring, 3),
        HRW.owners({:user, 7}, f.skeleton, 3),
        HRW.owner_batch(@keys, @nodes),
        HRW.owner_batch(@keys, f.ring),
        HRW.owner_batch(@keys, f.skeleton),
        HRW.group_by_owner(@keys, f.skeleton),
        HRW.moves(@keys, f.skeleton, f.bigger),
        HRW.Bounded.assignments(@keys, @nodes),
        HRW.term_id({:user, 7}),
        HRW.owner({:user, 7}, HRW.Ring.new(@nodes)),
        HRW.owner({:user, 7}, HRW.build(@nodes))
      ]
    end

    # The state of a running system: its structures, their answers, and `count`
    # processes looping through every entry point (reporting to `parent`).
    def start(parent, count) do
      f = fixtures()
      expected = run_all(f)
      loopers = for _ <- 1..count, do: spawn(fn -> looper(parent, f, expected) end)
      {f, expected, loopers}
    end

    # A round in a new process, on the given structures and on new ones.
    def fresh_rounds(f) do
      task = Task.async(fn -> {run_all(f), run_all(fixtures())} end)
      Task.await(task, 60_000)
    end

    # Loops `run_all/1` until told to stop. Says when its first round is done, and
    # runs one more round after `:stop` (so each report covers a round after the
    # test's code operations); reports the rounds that matched `expected` and every
    # round that did not (an exception counts as a wrong answer).
    def looper(parent, f, expected) do
      {good, bad} = round(f, expected, 0, [])
      send(parent, {:first_round, self()})
      loop(parent, f, expected, good, bad)
    end

    defp loop(parent, f, expected, good, bad) do
      receive do
        :stop ->
          {good, bad} = round(f, expected, good, bad)
          send(parent, {:looped, self(), good, Enum.take(bad, 5)})
      after
        0 ->
          {good, bad} = round(f, expected, good, bad)
          loop(parent, f, expected, good, bad)
      end
    end

    # What the code server and the code purger are doing, and every process
    # waiting in the code loading or purging machinery (for a failure message).
    def code_processes do
      keys = [:registered_name, :status, :current_stacktrace, :message_queue_len, :messages]

      for pid <- Process.list(),
          info = Process.info(pid, keys),
          info != nil,
          in_code_machinery?(info),
          do: {pid, Keyword.update!(info, :messages, &Enum.take(&1, 10))}
    end

    defp in_code_machinery?(info) do
      info[:registered_name] in [:code_server, :erts_code_purger] or
        Enum.any?(info[:current_stacktrace], fn {m, f, _, _} ->
          m in [:code, :code_server, :erts_code_purger, :error_handler, HRW.Native] or
            f in [:load_nif, :call_on_load_function]
        end)
    end

    defp round(f, expected, good, bad) do
      result =
        try do
          run_all(f)
        catch
          kind, reason -> {:raised, kind, reason, Enum.take(__STACKTRACE__, 3)}
        end

      if result == expected, do: {good + 1, bad}, else: {good, [result | bad]}
    end
  end

:persistent_term.put({HRW.ReloadDriver, :beam}, driver_beam)

defmodule HRW.ReloadTest do
  # Reloading HRW.Native (`:code.load_file/1`, IEx's `r/1` and `recompile`, a
  # release's hot upgrade) must keep every function answering: a NIF library whose
  # on_load fails on a reload leaves calls through HRW.Native's funs raising
  # BadFunctionError or crashing the VM. Each case runs in a :peer node, so a crash fails the test (the peer goes
  # down) instead of ending the suite. The code operations run on the peer, never
  # in this VM, so the module runs beside the others.
  use ExUnit.Case, async: true

  alias HRW.ReloadDriver

  @loopers 4
  @moduletag timeout: HRW.TestTimeouts.ms(600_000)

  setup_all do
    HRW.TestPeers.distributed!()
  end

  setup do
    {peer, node} = HRW.TestPeers.start_peer(:hrw_reload, :peer)
    beam = :persistent_term.get({ReloadDriver, :beam})

    {:module, ReloadDriver} =
      :erpc.call(node, :code, :load_binary, [ReloadDriver, ~c"driver", beam])

    {:ok, _} = :erpc.call(node, Application, :ensure_all_started, [:hrw])
    %{peer: peer, node: node}
  end

  # The code operations of each case, run on the peer one after another while the
  # loopers run. A hard purge kills the processes that are inside the purged code
  # at that instant (the VM's rule for every module), so those cases allow a looper
  # to end :killed; no case allows a wrong answer.
  @cases [
    {"load_file (an upgrade)", [:load], false},
    {"load_file twice, then soft_purge", [:load, :soft_purge, :load, :soft_purge], false},
    {"load_file, then purge", [:load, :purge], true},
    {"delete, purge, and load again", [:load, :purge, :delete, :purge, :ensure_loaded], true}
  ]

  for {name, ops, kills?} <- @cases do
    test "#{name}: the VM survives and every function keeps answering", %{node: node} do
      check(node, unquote(ops), unquote(kills?))
    end
  end

  defp check(node, ops, kills?) do
    me = self()

    # On the peer: structures, their expected answers, and the loopers.
    {fixtures, expected, loopers} = :erpc.call(node, ReloadDriver, :start, [me, @loopers])
    refs = Map.new(loopers, &{Process.monitor(&1), &1})
    # The operations start once every looper is running rounds, however slow the
    # machine.
    for pid <- loopers, do: assert_receive({:first_round, ^pid}, HRW.TestTimeouts.ms(60_000))
    for op <- ops, do: run(node, op)

    # A process started after the operations answers like the ones before, on the
    # structures built before them and on new ones.
    assert :erpc.call(node, ReloadDriver, :fresh_rounds, [fixtures], HRW.TestTimeouts.ms(60_000)) ==
             {expected, expected}

    # Every looper that is still alive ran more rounds, all of them right.
    results =
      for {ref, pid} <- refs do
        send(pid, :stop)

        receive do
          {:looped, ^pid, good, bad} ->
            assert bad == [], "a looper got wrong answers: #{inspect(bad, limit: :infinity)}"
            Process.demonitor(ref, [:flush])
            {:ran, good}

          {:DOWN, ^ref, :process, ^pid, reason} ->
            assert kills? and reason == :killed, "a looper ended: #{inspect(reason)}"
            :killed
        after
          30_000 ->
            info = :erpc.call(node, Process, :info, [pid, [:status, :current_stacktrace]])
            flunk("a looper did not answer: #{inspect(info, limit: :infinity)}")
        end
      end

    assert Enum.any?(results, &match?({:ran, n} when n > 0, &1))
    assert :erpc.call(node, :code, :is_loaded, [HRW.Native]) != false
  end

  defp run(node, :load), do: assert({:module, HRW.Native} = remote(node, :load_file))

  # After a delete, the loopers' next calls load the module again (interactive
  # mode), so its on_load may be running when the test asks for it: the test asks
  # as those callers do. OTP 25's code server never answers a `:code.load_file/1`
  # that waits behind another process's on_load, whatever the module; OTP 29 answers.
  defp run(node, :ensure_loaded),
    do: assert({:module, HRW.Native} = remote(node, :ensure_loaded))

  defp run(node, :purge), do: remote(node, :purge)
  defp run(node, :delete), do: remote(node, :delete)

  # soft_purge refuses while a process still runs the old code: retried until the
  # loopers have left it (each call into HRW.Native moves them to the new code).
  defp run(node, :soft_purge) do
    HRW.TestPeers.eventually(fn -> remote(node, :soft_purge) end, "soft_purge")
  end

  # A code operation that does not return fails with what the VM's code server and
  # code purger were doing, and the processes waiting on them.
  defp remote(node, fun) do
    :erpc.call(node, :code, fun, [HRW.Native], HRW.TestTimeouts.ms(120_000))
  catch
    :error, {:erpc, :timeout} ->
      flunk("""
      :code.#{fun}(HRW.Native) did not return on the peer. Its code processes:
      #{inspect(:erpc.call(node, ReloadDriver, :code_processes, []), pretty: true, limit: :infinity)}
      """)
  end
end

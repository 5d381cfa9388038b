defmodule HRW.Cluster.Evaluation do
  @moduledoc false
  # The short-lived processes of an `HRW.Cluster` server. Everything user-supplied
  # (the `:source` read, `:allow`, `:deny`, `:weight_fn`) and every build runs in a
  # process of its own, linked (it dies with the server) and monitored (its end is
  # seen), never in the server. The server starts one with `start/1` and either
  # waits for it (`await/3`: its first evaluation, builds) or receives its
  # `result_message/2` (membership changes).

  import HRW.Cluster.Check, only: [is_weight: 1]

  alias HRW.Cluster.Describe

  @result :"$hrw_cluster_result"
  @failed :"$hrw_cluster_failed"

  @typedoc "A running evaluation process."
  @type t :: %{tag: reference(), pid: pid(), mref: reference()}

  @typedoc "What it computes: the members (a map of the server's settings) or one build."
  @type job :: map() | {:build, HRW.Cluster.Server.spec()}

  @typedoc "Its result."
  @type result ::
          {:read, [term()],
           :unchanged | {:built, HRW.Cluster.Server.spec(), HRW.Cluster.structure()}}
          | {:ok, HRW.Cluster.structure()}
          | {:error, String.t()}

  @doc "The message an evaluation sends its server: `{tag, ref, result}`."
  defmacro result_message(ref, result),
    do: quote(do: {unquote(@result), unquote(ref), unquote(result)})

  @doc """
  Starts `job` in a linked, monitored process that sends its result to the caller:
  `{:read, entries, :unchanged | {:built, spec, structure}} | {:error, message}`
  for the members (the entries the source lists, and what they build with the
  job's held members),
  `{:ok, structure} | {:error, message}` for `{:build, spec}`.
  """
  @spec start(job()) :: t()
  def start(job) do
    server = self()
    tag = make_ref()

    {pid, mref} =
      Process.spawn(fn -> send(server, {@result, tag, run(job)}) end, [:link, :monitor])

    %{tag: tag, pid: pid, mref: mref}
  end

  @doc """
  Waits at most `timeout` ms for `eval`'s result; kills it after that. `what` names
  the work in the error messages ("the evaluation of the members").
  """
  @spec await(t(), timeout(), String.t()) :: result()
  def await(%{tag: tag, pid: pid, mref: mref}, timeout, what) do
    receive do
      {@result, ^tag, result} ->
        Process.demonitor(mref, [:flush])
        result

      {:DOWN, ^mref, :process, _pid, reason} ->
        {:error, exited(what, reason)}
    after
      timeout ->
        Process.exit(pid, :kill)
        Process.demonitor(mref, [:flush])

        receive do
          {@result, ^tag, _result} -> :ok
        after
          0 -> :ok
        end

        {:error, timed_out(what, timeout)}
    end
  end

  @doc "The message for work that did not finish within `timeout` ms."
  @spec timed_out(String.t(), timeout()) :: String.t()
  def timed_out(what, timeout) do
    "#{what} did not finish within #{timeout} ms (:callback_timeout) and was killed"
  end

  @doc "The message for work whose process exited."
  @spec exited(String.t(), term()) :: String.t()
  def exited(what, reason), do: "#{what} exited: #{Describe.value(reason)}"

  defp run({:build, spec}) do
    {:ok, build(spec)}
  catch
    kind, reason -> {:error, "building with the overrides #{describe(kind, reason)}"}
  end

  defp run(job), do: evaluate(job)

  # Runs in the evaluation process: {:read, entries, build} or {:error, message}.
  defp evaluate(%{} = job) do
    nodes = phase("reading the :source", fn -> source_nodes(job.source) end)

    allow = compiled(job.allow)
    deny = compiled(job.deny)

    members =
      nodes
      |> Enum.uniq()
      |> Enum.filter(
        &(allowed?(allow, :allow, &1, true) and not allowed?(deny, :deny, &1, false))
      )
      |> Enum.sort()

    entries =
      case job.weight_fn do
        nil -> members
        weight_fn -> Enum.map(members, &{&1, weight!(weight_fn, &1)})
      end

    # Members that departed but whose keys stay where they are for now (the
    # server's lease), with the entries they had: built with them, as the
    # machine will most likely decide (it decides with what it holds then).
    held = Enum.reject(job.held, &(member_node(&1) in members))
    spec = {job.structure, job.build_opts, job.overrides, Enum.sort(entries ++ held)}

    if spec == job.spec do
      {:read, entries, :unchanged}
    else
      {:read, entries, {:built, spec, phase("building the structure", fn -> build(spec) end)}}
    end
  catch
    {@failed, message} -> {:error, message}
    kind, reason -> {:error, "the evaluation of the members #{describe(kind, reason)}"}
  end

  defp phase(what, fun) do
    fun.()
  catch
    kind, reason -> throw({@failed, "#{what} #{describe(kind, reason)}"})
  end

  defp member_node({node, _weight}), do: node
  defp member_node(node), do: node

  defp source_nodes(:nodes), do: [node() | Node.list(:visible)]

  defp source_nodes({:pg, scope, group}) do
    scope |> :pg.get_members(group) |> Enum.map(&node/1)
  end

  # A filter's regexes compiled in this VM, where they are matched (see
  # `HRW.Cluster.Options`: kept as `{:regexes, [{source, opts}]}`).
  defp compiled({:regexes, sources}),
    do: Enum.map(sources, fn {source, opts} -> Regex.compile!(source, opts) end)

  defp compiled(filter), do: filter

  defp allowed?(nil, _key, _node, default), do: default

  defp allowed?(fun, key, node, _default) when is_function(fun, 1),
    do: !!callback(fun, key, node)

  defp allowed?(regexes, _key, node, _default) do
    name = Atom.to_string(node)
    Enum.any?(regexes, &Regex.match?(&1, name))
  end

  defp weight!(weight_fn, node) do
    case callback(weight_fn, :weight_fn, node) do
      w when is_weight(w) ->
        w

      other ->
        throw(
          {@failed,
           ":weight_fn returned #{Describe.value(other)} for #{Describe.value(node)}, " <>
             "not a positive number at most 2^53"}
        )
    end
  end

  defp callback(fun, key, node) do
    fun.(node)
  catch
    kind, reason ->
      throw({@failed, "#{inspect(key)} #{describe(kind, reason)} for #{Describe.value(node)}"})
  end

  defp describe(:error, %{__exception__: true, message: message} = exception)
       when is_binary(message),
       do: "raised #{Describe.value(exception.__struct__)}: #{Describe.value(message)}"

  defp describe(:error, reason), do: "raised #{Describe.value(reason)}"
  defp describe(:throw, value), do: "threw #{Describe.value(value)}"
  defp describe(:exit, reason), do: "exited with #{Describe.value(reason)}"

  defp build({_structure, _build_opts, _overrides, []}), do: nil

  defp build({structure, build_opts, overrides, entries}) do
    # Entries are all bare nodes, or all {node, weight} (with :weight_fn).
    scorer = if match?([{_, _} | _], entries), do: [scorer: %HRW.Weighted{}], else: []
    overrides = if overrides, do: [overrides: overrides], else: []

    case structure do
      :skeleton -> HRW.build(entries, build_opts ++ scorer ++ overrides)
      :ring -> HRW.Ring.new(entries, scorer ++ overrides)
    end
  end
end

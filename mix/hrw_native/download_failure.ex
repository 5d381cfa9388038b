defmodule Mix.HrwNative.Download.Failure do
  @moduledoc """
  A failed download in one sentence, `{:refused, message}` or `{:unavailable,
  message}`, every URL shown by `Mix.HrwNative.Wire.show/1` and every outside
  value escaped. `s` is `Mix.HrwNative.Download`'s request state.
  """

  alias Mix.HrwNative.Wire

  @type result :: {:refused, String.t()} | {:unavailable, String.t()}

  @doc "A wait that ran out: the deadline, or the timeout for the next part."
  @spec timed_out(map()) :: result()
  def timed_out(s) do
    what =
      if s.deadline <= System.monotonic_time(:millisecond),
        do: "not done within #{s.opts.timeout_ms * 20} ms",
        else: "no answer for #{s.opts.timeout_ms} ms"

    {:unavailable, "downloading #{Wire.show(s.url)}: #{what} (timed out)"}
  end

  @doc "What `:httpc` answered `{:error, reason}` with, in words."
  @spec failed(map(), term()) :: result()
  def failed(s, closed)
      when closed in [:socket_closed_remotely, {:shutdown, :server_closed}] do
    cond do
      match?({:ok, _}, s.length) -> truncated(s, elem(s.length, 1))
      s.chunked -> {:refused, "#{Wire.show(s.url)} was truncated: the chunked body did not end"}
      true -> {:unavailable, "#{Wire.show(s.url)} closed the connection before its answer ended"}
    end
  end

  def failed(s, :timeout), do: timed_out(%{s | deadline: System.monotonic_time(:millisecond)})

  # The handler ended with no answer: a stand-alone :httpc drops a request it
  # would re-send later (a 503 with a Retry-After, a connection closed first).
  def failed(s, :dropped),
    do:
      {:unavailable,
       "#{Wire.show(s.url)} gave no answer to use (a 503 asking to retry later, " <>
         "or a connection closed before the answer)"}

  # What the :httpc of OTP 25 to 29 stops on while it reads an answer (the
  # handler's exit and where it happened): words, never the term.
  def failed(s, {:shutdown, {{_kind, why}, [_ | _] = stack}}) do
    at = for {module, function, _, _} <- stack, do: {module, function}

    cond do
      {:httpc_response, :status_service_unavailable} in at ->
        {:unavailable, "#{Wire.show(s.url)} answered HTTP 503 with a bad Retry-After"}

      match?({:not_yet_implemented, _}, why) ->
        {:refused, "#{Wire.show(s.url)} sent a multipart/byteranges body, which is not read"}

      why == :badarg or {:httpc_response, :format_response} in at ->
        {:refused, "#{Wire.show(s.url)} sent a bad content-length"}

      true ->
        {:refused, "#{Wire.show(s.url)} sent an answer OTP's HTTP client could not read"}
    end
  end

  # :httpc lists a reason per address family tried (:inet6 first, then :inet),
  # and :tls after a proxy's CONNECT: a TLS alert wins, else the last one.
  def failed(s, {:failed_connect, details}) do
    reasons = for {family, _, reason} <- details, family in [:inet, :inet6, :tls], do: reason

    reason =
      Enum.find(reasons, &match?({:tls_alert, _}, &1)) ||
        Enum.find(reasons, &(&1 != :nxdomain)) || List.last(reasons)

    via = if s.proxy, do: " (through the proxy #{s.proxy.shown})", else: ""

    case reason do
      {:tls_alert, {alert, description}} ->
        {:refused,
         "the TLS handshake with #{Wire.show(s.url)}#{via} failed (#{alert}: " <>
           "#{description |> to_string() |> String.replace(~r/\s+/, " ") |> String.trim() |> Wire.escape()})"}

      :timeout ->
        {:unavailable,
         "connecting to #{Wire.show(s.url)}#{via}: no answer for #{s.opts.timeout_ms} ms (timed out)"}

      reason ->
        {:unavailable, "connecting to #{Wire.show(s.url)}#{via} failed: #{describe(reason)}"}
    end
  end

  def failed(s, {:could_not_establish_ssl_tunnel, {_, status, _}}),
    do:
      {:unavailable,
       "the proxy #{s.proxy.shown} answered HTTP #{status} to the CONNECT for #{Wire.show(s.url)}"}

  # What the :httpc of OTP 27 and 29 refuses itself (OTP 25's does not): headers
  # past its limit, a Content-Length that is not a number. Refused, as the same
  # answers are on OTP 25.
  def failed(s, {:header_too_long, {:max, max}}),
    do: {:refused, "#{Wire.show(s.url)} sent headers over the #{max}-byte limit of :httpc"}

  def failed(s, {:invalid_content_length, value}) when is_list(value),
    do:
      {:refused,
       "#{Wire.show(s.url)} sent a bad content-length: " <>
         Wire.escape(IO.chardata_to_string(value))}

  def failed(s, reason),
    do: {:unavailable, "downloading #{Wire.show(s.url)} failed: #{describe(reason)}"}

  @doc "A reason in words: a POSIX error's, else what kind of failure it is."
  @spec describe(term()) :: String.t()
  def describe(reason) do
    text = if is_atom(reason), do: to_string(:inet.format_error(reason)), else: "unknown"

    if text =~ "unknown",
      do: "an error of the network or of OTP's HTTP client",
      else: "#{text} (#{reason})"
  end

  @doc "A body over the size limit."
  @spec oversized(map(), non_neg_integer()) :: result()
  def oversized(s, size),
    do:
      {:refused,
       "#{Wire.show(s.url)} is at least #{size} bytes, over the #{s.opts.max_bytes}-byte limit of an archive"}

  @doc "An answer that made the download's process hold `held` bytes, over `limit`."
  @spec over_memory(Wire.url(), pos_integer(), pos_integer()) :: result()
  def over_memory(url, held, limit),
    do:
      {:refused,
       "#{Wire.show(url)} sent more than a download may hold: over #{div(held, 1_048_576)} MiB " <>
         "in memory, over its #{div(limit, 1_048_576)} MiB (twice the body's limit, and 16 MiB)"}

  @doc "A body that ended before its declared length."
  @spec truncated(map(), non_neg_integer()) :: result()
  # Not how many bytes came: :httpc holds back what came with the head.
  def truncated(s, length),
    do:
      {:refused,
       "#{Wire.show(s.url)} was truncated: the connection closed before its " <>
         "#{length} declared bytes arrived"}
end

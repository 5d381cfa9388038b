defmodule Mix.HrwNative.Download.Failure do
  @moduledoc """
  A failed download in one sentence: what `:httpc` answered, a wait that ran out,
  a body over the limit or cut short, as `{:refused, message}` (what came must not
  be used) or `{:unavailable, message}` (nothing came). `s` is the request's state
  in `Mix.HrwNative.Download`: its `:url`, `:proxy`, `:opts`, `:deadline`, and the
  body's declared `:length` and `:chunked` framing. Every URL is shown by
  `Mix.HrwNative.Wire.show/1` and every outside value escaped.
  """

  alias Mix.HrwNative.Wire

  @type result :: {:refused, String.t()} | {:unavailable, String.t()}

  @doc "A wait that ran out: the deadline, or the timeout for the next part."
  @spec timed_out(map()) :: result()
  def timed_out(s) do
    if s.deadline - System.monotonic_time(:millisecond) <= 0,
      do:
        {:unavailable,
         "downloading #{Wire.show(s.url)}: not done within #{s.opts.timeout_ms * 20} ms (timed out)"},
      else:
        {:unavailable,
         "downloading #{Wire.show(s.url)}: no answer for #{s.opts.timeout_ms} ms (timed out)"}
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

  # :httpc lists a reason per address family tried (:inet6 first, then :inet),
  # and :tls after a proxy's CONNECT: a TLS alert wins, else the last one.
  def failed(s, {:failed_connect, details}) do
    reasons = for {family, _, reason} <- details, family in [:inet, :inet6, :tls], do: reason

    reason =
      Enum.find(reasons, &match?({:tls_alert, _}, &1)) || List.last(reasons) ||
        {:failed_connect, details}

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

  @doc "A reason in words when it is a POSIX error, else shown briefly and escaped."
  @spec describe(term()) :: String.t()
  def describe(reason) when is_atom(reason) do
    case :inet.format_error(reason) do
      ~c"unknown POSIX error" ++ _ -> Atom.to_string(reason)
      text -> "#{text} (#{reason})"
    end
  end

  def describe(reason), do: Wire.escape(inspect(reason, limit: 8, printable_limit: 100))

  @doc "A body over the size limit."
  @spec oversized(map(), non_neg_integer()) :: result()
  def oversized(s, size),
    do:
      {:refused,
       "#{Wire.show(s.url)} is at least #{size} bytes, over the #{s.opts.max_bytes}-byte limit of an archive"}

  @doc "A body that ended before its declared length."
  @spec truncated(map(), non_neg_integer()) :: result()
  # Not how many bytes came: :httpc holds back what came with the head.
  def truncated(s, length),
    do:
      {:refused,
       "#{Wire.show(s.url)} was truncated: the connection closed before its " <>
         "#{length} declared bytes arrived"}
end

defmodule Mix.HrwNative.Download do
  @moduledoc """
  The one HTTP download of the compile task: `:httpc` in its own profile, streaming
  into memory with a size limit, an idle timeout and redirects checked one by one.
  """

  alias Mix.HrwNative.Precompiled

  @max_redirects 5

  @doc """
  Downloads `url` into memory with `:httpc`: certificates verified against the OS's
  CA store (`:public_key.cacerts_get/0`, or the PEM file in `HRW_NATIVE_CACERTS_PATH`)
  with a hostname check; redirects followed (at most #{@max_redirects}, each checked
  by `Mix.HrwNative.Precompiled.check_url/1`). `{:unavailable, reason}` for a failed download (no answer
  within `timeout_ms`, an HTTP error status, a network error); `{:refused, reason}`
  for a body over `max_bytes` or shorter than its declared length.
  """
  @spec download(String.t(), pos_integer(), pos_integer()) ::
          {:ok, binary()} | {:unavailable, String.t()} | {:refused, String.t()}
  def download(url, timeout_ms, max_bytes), do: download(url, timeout_ms, max_bytes, 0)

  defp download(url, _timeout, _max, redirects) when redirects > @max_redirects,
    do: {:unavailable, "more than #{@max_redirects} redirects, the last to #{url}"}

  defp download(url, timeout, max, redirects) do
    with :ok <- Precompiled.url_allowed(url),
         {:ok, profile} <- httpc_profile(),
         {:ok, ssl} <- ssl_options(url) do
      http_options = [
        connect_timeout: timeout,
        timeout: timeout * 20,
        autoredirect: false,
        ssl: ssl
      ]

      request = {String.to_charlist(url), [{~c"user-agent", ~c"hrw-native-compiler"}]}
      options = [sync: false, stream: :self, body_format: :binary]

      case :httpc.request(:get, request, http_options, options, profile) do
        {:ok, ref} ->
          state = %{url: url, ref: ref, profile: profile, timeout: timeout, max: max}

          case receive_body(state, nil, 0, []) do
            {:redirect, location} -> download(location, timeout, max, redirects + 1)
            other -> other
          end

        {:error, reason} ->
          {:unavailable, "the request for #{url} failed: #{inspect(reason)}"}
      end
    end
  end

  defp receive_body(%{ref: ref} = s, length, size, acc) do
    receive do
      {:http, {^ref, :stream_start, headers}} ->
        length = content_length(headers)

        if length && length > s.max,
          do: cancel(s, oversized(s, length)),
          else: receive_body(s, length, size, acc)

      {:http, {^ref, :stream, chunk}} ->
        size = size + byte_size(chunk)

        if size > s.max,
          do: cancel(s, oversized(s, size)),
          else: receive_body(s, length, size, [acc | chunk])

      {:http, {^ref, :stream_end, _headers}} ->
        if length && size != length,
          do: truncated(s, size, length),
          else: {:ok, IO.iodata_to_binary(acc)}

      {:http, {^ref, {{_, status, _}, headers, body}}} ->
        response(s, status, headers, body)

      {:http, {^ref, {:error, reason}}} ->
        if length && size < length,
          do: truncated(s, size, length),
          else: {:unavailable, "downloading #{s.url} failed: #{inspect(reason)}"}
    after
      s.timeout ->
        cancel(
          s,
          {:unavailable, "downloading #{s.url}: no answer for #{s.timeout} ms (timed out)"}
        )
    end
  end

  defp response(s, status, headers, _body) when status in [301, 302, 303, 307, 308] do
    case List.keyfind(headers, ~c"location", 0) do
      {_, location} -> {:redirect, URI.merge(s.url, List.to_string(location)) |> to_string()}
      nil -> {:unavailable, "#{s.url} answered #{status} with no location"}
    end
  end

  defp response(s, 200, _headers, body) when byte_size(body) > s.max,
    do: oversized(s, byte_size(body))

  defp response(_s, 200, _headers, body), do: {:ok, body}

  defp response(s, status, _headers, _body),
    do: {:unavailable, "#{s.url} answered HTTP #{status}"}

  defp content_length(headers) do
    with {_, value} <- List.keyfind(headers, ~c"content-length", 0),
         {length, ""} <- Integer.parse(List.to_string(value)) do
      length
    else
      _ -> nil
    end
  end

  defp oversized(s, size),
    do:
      {:refused, "#{s.url} is at least #{size} bytes, over the #{s.max}-byte limit of an archive"}

  defp truncated(s, size, length),
    do: {:refused, "#{s.url} was truncated: #{size} of its #{length} bytes arrived"}

  defp cancel(s, result) do
    :ok = :httpc.cancel_request(s.ref, s.profile)
    # A message sent before the cancellation must not reach a later receive.
    flush(s.ref)
    result
  end

  @doc false
  # Mix 1.15+ keeps only the project's own applications on the code path while it
  # compiles, so OTP's :inets, :ssl and :crypto must be put back before they are
  # used (`Mix.ensure_application!/1`, which Elixir 1.14 lacks and does not need).
  @spec on_code_path([atom()]) :: :ok
  def on_code_path(apps) do
    if function_exported?(Mix, :ensure_application!, 1) do
      Enum.each(apps, &apply(Mix, :ensure_application!, [&1]))
    end

    :ok
  end

  defp flush(ref) do
    receive do
      {:http, {^ref, _}} -> flush(ref)
      {:http, {^ref, _, _}} -> flush(ref)
    after
      0 -> :ok
    end
  end

  defp httpc_profile do
    on_code_path([:crypto, :public_key, :ssl, :inets])

    with {:ok, _} <- Application.ensure_all_started(:inets),
         {:ok, _} <- Application.ensure_all_started(:ssl) do
      case :inets.start(:httpc, profile: :hrw_native) do
        {:ok, _} -> {:ok, :hrw_native}
        {:error, {:already_started, _}} -> {:ok, :hrw_native}
        {:error, reason} -> {:unavailable, "cannot start :httpc: #{inspect(reason)}"}
      end
    else
      {:error, reason} -> {:unavailable, "cannot start :inets and :ssl: #{inspect(reason)}"}
    end
  end

  defp ssl_options(url) do
    %URI{scheme: scheme, host: host} = URI.parse(url)

    with "https" <- scheme,
         {:ok, cacerts} <- cacerts() do
      {:ok,
       cacerts ++
         [
           verify: :verify_peer,
           depth: 4,
           server_name_indication: String.to_charlist(host),
           customize_hostname_check: [
             match_fun: :public_key.pkix_verify_hostname_match_fun(:https)
           ]
         ]}
    else
      "http" -> {:ok, []}
      {:unavailable, _} = error -> error
    end
  end

  defp cacerts do
    case System.get_env("HRW_NATIVE_CACERTS_PATH") do
      path when path not in [nil, ""] ->
        {:ok, [cacertfile: String.to_charlist(path)]}

      _ ->
        try do
          {:ok, [cacerts: :public_key.cacerts_get()]}
        rescue
          error ->
            {:unavailable,
             "no CA certificates to verify the server with (#{Exception.message(error)}); " <>
               "set HRW_NATIVE_CACERTS_PATH to a PEM file"}
        end
    end
  end
end

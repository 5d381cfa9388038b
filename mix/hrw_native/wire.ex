defmodule Mix.HrwNative.Wire do
  @moduledoc """
  Everything the download takes from outside and acts on, checked in this one
  place (the URLs it fetches, `Location`, `Content-Length`), and how any of them
  is shown: a URL as scheme, host, port and path only (never its userinfo or
  query), every outside value with its control characters escaped. A URL is
  printable ASCII (an internationalized host in its `xn--` form), `https` (or
  `http` to `127.0.0.1`, `localhost` or `[::1]`), with a DNS name or an IP
  literal and a port from 1 to 65535.
  """

  @max_url_bytes 8192
  @loopback ["127.0.0.1", "localhost", "[::1]"]
  @default_port %{"http" => 80, "https" => 443}

  @typedoc "A URL that passed `parse/1`: the host in lowercase, the port always set."
  @type url :: %{
          scheme: String.t(),
          userinfo: String.t() | nil,
          host: String.t(),
          port: 1..65_535,
          path: String.t(),
          query: String.t() | nil
        }

  @url ~r{\A([A-Za-z][A-Za-z0-9+.-]*)://(?:([^@/?#]*)@)?(\[[^\]/?#@]*\]|[^:/?#\[\]@]*)(?::([^/?#]*))?((?:/[^?#]*)?)(?:\?([^#]*))?(?:#.*)?\z}s

  @doc """
  Parses and checks a URL to download from (see the module doc), or with `:proxy`
  a proxy's URL (`http`, any host).

      iex> {:ok, url} = Mix.HrwNative.Wire.parse("https://Mirror.example/hrw?sig=1")
      iex> {url.host, url.port, url.path}
      {"mirror.example", 443, "/hrw"}

      iex> Mix.HrwNative.Wire.parse("http://user:secret@example.com/hrw")
      {:error, "is not an https URL (plain http is allowed only to 127.0.0.1, localhost or [::1])"}

  An error says what is wrong, never what the text holds (it may hold a secret).
  """
  @spec parse(term(), :download | :proxy) :: {:ok, url()} | {:error, String.t()}
  def parse(text, use \\ :download)

  def parse(text, use) when is_binary(text) do
    with :ok <- printable(text, "a URL"),
         [_ | parts] <- Regex.run(@url, text),
         [scheme, userinfo, host, port, path, query] <- pad(parts, 6),
         scheme = String.downcase(scheme),
         host = String.downcase(host),
         :ok <- scheme(scheme, host, use),
         :ok <- host(host),
         {:ok, port} <- port(scheme, port) do
      {:ok,
       %{
         scheme: scheme,
         userinfo: nonempty(userinfo),
         host: host,
         port: port,
         path: if(path == "", do: "/", else: path),
         query: nonempty(query)
       }}
    else
      {:error, _} = error -> error
      _ -> {:error, "is not a URL"}
    end
  end

  def parse(_other, _use), do: {:error, "is not a URL"}

  defp pad(parts, n), do: parts ++ List.duplicate("", n - length(parts))

  defp nonempty(""), do: nil
  defp nonempty(value), do: value

  defp printable(text, what) do
    cond do
      byte_size(text) > @max_url_bytes ->
        {:error, "is #{byte_size(text)} bytes long, over the #{@max_url_bytes}-byte limit"}

      text =~ ~r/\A[\x21-\x7e]+\z/ ->
        :ok

      true ->
        {:error, "holds a space, a control character or a non-ASCII byte, which #{what} may not"}
    end
  end

  # A proxy is spoken to in plain http (https goes through it in a CONNECT tunnel).
  defp scheme("http", _host, :proxy), do: :ok
  defp scheme(_scheme, _host, :proxy), do: {:error, "is not an http:// URL"}
  defp scheme("https", _host, :download), do: :ok
  defp scheme("http", host, :download) when host in @loopback, do: :ok

  defp scheme(_scheme, _host, :download),
    do:
      {:error,
       "is not an https URL (plain http is allowed only to 127.0.0.1, localhost or [::1])"}

  defp host(host) do
    if ip_literal(host) != :error or dns_name?(host),
      do: :ok,
      else: {:error, "has no valid host (a DNS name or an IP address)"}
  end

  # Letters, digits and inner hyphens, labels of 1 to 63, at most 253 in all; the
  # last label is not all digits (that would be an IPv4 address in some notation).
  defp dns_name?(host) do
    labels = host |> String.trim_trailing(".") |> String.split(".")

    byte_size(host) <= 253 and
      Enum.all?(labels, &(&1 =~ ~r/\A[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\z/)) and
      not (List.last(labels) =~ ~r/\A[0-9]+\z/)
  end

  defp port(scheme, ""), do: {:ok, Map.fetch!(@default_port, scheme)}

  defp port(_scheme, digits) do
    case Integer.parse(digits) do
      {port, ""} when port in 1..65_535 and byte_size(digits) <= 5 -> {:ok, port}
      _ -> {:error, "has a port that is not a number from 1 to 65535"}
    end
  end

  @doc """
  The URL a redirect from `from` leads to: one `Location` value (repeats count
  once), relative (keeping `from`'s host and userinfo) or absolute, that `parse/1`
  accepts with `from`'s scheme.
  """
  @spec location(url(), [String.t()]) :: {:ok, url()} | {:error, String.t()}
  def location(from, values) do
    with {:ok, value} <- single(values, from),
         :ok <- redirect_check(from, printable(value, "a Location")),
         {:ok, url} <- redirect_check(from, parse(absolute(from, value))) do
      cond do
        url.scheme == from.scheme ->
          {:ok, url}

        from.scheme == "https" ->
          {:error, "#{show(from)} redirects to #{show(url)}, from https to plain http"}

        true ->
          {:error,
           "#{show(from)} redirects to #{show(url)}, from #{from.scheme} to #{url.scheme}"}
      end
    end
  end

  defp single(values, from) do
    case Enum.uniq(values) do
      [value] -> {:ok, value}
      [] -> {:error, "#{show(from)} redirects with no Location"}
      _ -> {:error, "#{show(from)} redirects with #{length(values)} different Locations"}
    end
  end

  defp redirect_check(from, {:error, reason}),
    do: {:error, "#{show(from)} redirects to a URL that is refused: it #{reason}"}

  defp redirect_check(_from, ok), do: ok

  # An absolute Location is checked as it is written, not as URI.merge/2 would
  # rewrite it (it drops a port it cannot read); a relative one is resolved
  # against `from` (RFC 3986, 5.2), keeping its host and userinfo.
  defp absolute(from, value) do
    cond do
      value =~ ~r/\A[A-Za-z][A-Za-z0-9+.-]*:/ ->
        value

      String.starts_with?(value, "//") ->
        from.scheme <> ":" <> value

      true ->
        userinfo = if from.userinfo, do: from.userinfo <> "@", else: ""
        base = "#{from.scheme}://#{userinfo}#{from.host}:#{from.port}#{from.path}"
        base |> URI.merge(value) |> URI.to_string()
    end
  end

  @doc """
  The `Content-Length` of a response from its values: `:none`, `{:ok, bytes}` when
  every value is the same number, `{:error, reason}` when they differ or one is
  not a number.

      iex> Mix.HrwNative.Wire.content_length(["12", "12"])
      {:ok, 12}

      iex> Mix.HrwNative.Wire.content_length(["12", "13"])
      {:error, "a bad content-length: 12, 13"}
  """
  @spec content_length([String.t()]) :: :none | {:ok, non_neg_integer()} | {:error, String.t()}
  def content_length([]), do: :none

  def content_length(values) do
    case Enum.uniq(values) do
      [digits] when byte_size(digits) in 1..19 ->
        if digits =~ ~r/\A[0-9]+\z/, do: {:ok, String.to_integer(digits)}, else: bad(values)

      _ ->
        bad(values)
    end
  end

  defp bad(values),
    do: {:error, "a bad content-length: #{values |> Enum.join(", ") |> escape()}"}

  @doc """
  A parsed URL as it may be printed: scheme, host, port (when not the default)
  and path, escaped; never its userinfo, query or fragment.

      iex> {:ok, url} = Mix.HrwNative.Wire.parse("https://user:secret@mirror.example:8443/hrw/a.tar.gz?X-Amz-Signature=abc")
      iex> Mix.HrwNative.Wire.show(url)
      "https://mirror.example:8443/hrw/a.tar.gz"

      iex> Mix.HrwNative.Wire.show(%{scheme: "http", host: "127.0.0.1", port: 80, path: "/a\\e[2J"})
      "http://127.0.0.1/a\\\\x1B[2J"
  """
  @spec show(url()) :: String.t()
  def show(%{scheme: scheme, host: host, port: port, path: path}) do
    port = if port == Map.fetch!(@default_port, scheme), do: "", else: ":#{port}"
    escape("#{scheme}://#{host}#{port}#{path}")
  end

  @doc """
  `text` (from outside: a header, a URL, a file name) with every byte that is not
  printable ASCII written as `\\xNN`, and cut after 200 bytes.

      iex> Mix.HrwNative.Wire.escape("a\\r\\nb")
      "a\\\\x0D\\\\x0Ab"
  """
  @spec escape(String.t()) :: String.t()
  def escape(text) when is_binary(text) do
    {shown, rest} = if byte_size(text) > 200, do: split(text, 200), else: {text, ""}

    escaped = for <<byte <- shown>>, into: "", do: escape_byte(byte)
    if rest == "", do: escaped, else: escaped <> "…"
  end

  defp split(text, n), do: {binary_part(text, 0, n), binary_part(text, n, byte_size(text) - n)}

  defp escape_byte(byte) when byte in 0x20..0x7E and byte != ?\\, do: <<byte>>
  defp escape_byte(?\\), do: "\\\\"

  defp escape_byte(byte),
    do: "\\x" <> (byte |> Integer.to_string(16) |> String.pad_leading(2, "0"))

  @doc "`url` as the string to request: its query included, its userinfo not."
  @spec request_url(url()) :: String.t()
  def request_url(%{} = url) do
    # Written as clients write it, the default port left out (an http proxy gets
    # this whole URL in its request line).
    port = if url.port == Map.fetch!(@default_port, url.scheme), do: "", else: ":#{url.port}"
    query = if url.query, do: "?" <> url.query, else: ""
    "#{url.scheme}://#{url.host}#{port}#{url.path}#{query}"
  end

  @doc """
  The `user:password` of `url`'s userinfo, percent-decoded, or nil. What goes
  into an `Authorization: Basic` (or `Proxy-Authorization`) header.
  """
  @spec credentials(url()) :: {String.t(), String.t()} | nil
  def credentials(%{userinfo: nil}), do: nil

  def credentials(%{userinfo: userinfo}) do
    case String.split(userinfo, ":", parts: 2) do
      [user, password] -> {URI.decode(user), URI.decode(password)}
      [user] -> {URI.decode(user), ""}
    end
  end

  @doc "Whether `host` (a parsed URL's) is an IP literal, IPv6 ones in brackets."
  @spec ip_literal(String.t()) :: {:ok, :inet.ip_address()} | :error
  def ip_literal("[" <> rest) do
    case :inet.parse_ipv6strict_address(String.to_charlist(String.trim_trailing(rest, "]"))) do
      {:ok, ip} -> {:ok, ip}
      _ -> :error
    end
  end

  def ip_literal(host) do
    case :inet.parse_ipv4strict_address(String.to_charlist(host)) do
      {:ok, ip} -> {:ok, ip}
      _ -> :error
    end
  end
end

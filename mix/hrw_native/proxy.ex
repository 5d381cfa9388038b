defmodule Mix.HrwNative.Proxy do
  @moduledoc """
  The proxy a download goes through, from the variables Mix, Hex, curl and
  RustlerPrecompiled read (`http_proxy`, `https_proxy`, `no_proxy`, lowercase
  first): docs/NATIVE.md, "Proxies", says how each is read.
  """

  alias Mix.HrwNative.Wire

  @typedoc "A proxy to use: where it is (an IPv6 host without brackets), its URL as shown, and its credentials."
  @type t :: %{
          host: String.t(),
          port: 1..65_535,
          shown: String.t(),
          credentials: {String.t(), String.t()} | nil
        }

  @typedoc "The proxy settings read by `settings/1`: each proxy with the variable that held it."
  @type settings :: %{
          http: {String.t(), String.t()} | nil,
          https: {String.t(), String.t()} | nil,
          no_proxy: [String.t()]
        }

  @doc """
  The proxy settings in `env` (a map of OS variables).

      iex> Mix.HrwNative.Proxy.settings(%{"HTTPS_PROXY" => "http://p:3128", "no_proxy" => "a.example, .b.example"})
      %{http: nil, https: {"HTTPS_PROXY", "http://p:3128"}, no_proxy: ["a.example", "b.example"]}
  """
  @spec settings(%{String.t() => String.t()}) :: settings()
  def settings(env) do
    %{
      http: variable(env, "http_proxy"),
      https: variable(env, "https_proxy"),
      no_proxy:
        (variable(env, "no_proxy") || {nil, ""})
        |> elem(1)
        |> String.split(",")
        |> Enum.map(&(&1 |> String.trim() |> String.trim_leading(".") |> String.downcase()))
        |> Enum.reject(&(&1 == ""))
    }
  end

  defp variable(env, name) do
    Enum.find_value([name, String.upcase(name)], fn name ->
      case env[name] do
        value when value in [nil, ""] -> nil
        value -> {name, value}
      end
    end)
  end

  @doc """
  The proxy for `url` (a `Mix.HrwNative.Wire.url/0`): `:direct` when none is
  set for its scheme or `no_proxy` names its host, `{:ok, proxy}`, or
  `{:error, reason}` when the variable holds no usable proxy URL.

      iex> settings = Mix.HrwNative.Proxy.settings(%{"https_proxy" => "http://u:pw@proxy.corp:3128", "NO_PROXY" => "corp"})
      iex> {:ok, url} = Mix.HrwNative.Wire.parse("https://mirror.example/a")
      iex> {:ok, proxy} = Mix.HrwNative.Proxy.for_url(url, settings)
      iex> {proxy.host, proxy.port, proxy.shown}
      {"proxy.corp", 3128, "http://proxy.corp:3128"}
      iex> {:ok, inside} = Mix.HrwNative.Wire.parse("https://files.corp/a")
      iex> Mix.HrwNative.Proxy.for_url(inside, settings)
      :direct
  """
  @spec for_url(Wire.url(), settings()) :: :direct | {:ok, t()} | {:error, String.t()}
  def for_url(url, settings) do
    variable = if url.scheme == "https", do: settings.https, else: settings.http

    cond do
      variable == nil -> :direct
      bypassed?(url.host, settings.no_proxy) -> :direct
      true -> parse(variable)
    end
  end

  # Names match by suffix, at a dot; IP addresses only whole, as addresses.
  defp bypassed?(host, entries) do
    ip = Wire.ip_literal(host)
    host = host |> bare() |> String.trim_trailing(".")

    Enum.any?(entries, fn entry ->
      entry = bare(entry)

      entry == "*" or host == entry or
        if(ip == :error,
          do: String.ends_with?(host, "." <> entry),
          else: :inet.parse_address(String.to_charlist(entry)) == ip
        )
    end)
  end

  defp bare(host), do: host |> String.trim_leading("[") |> String.trim_trailing("]")

  defp parse({variable, value}) do
    text = if value =~ ~r{\A[A-Za-z][A-Za-z0-9+.-]*://}, do: value, else: "http://" <> value

    case Wire.parse(text, :proxy) do
      {:ok, url} ->
        {:ok,
         %{
           host: bare(url.host),
           port: url.port,
           shown: Wire.show(%{url | path: ""}),
           credentials: Wire.credentials(url)
         }}

      {:error, reason} ->
        {:error, "#{variable} holds no usable proxy: its value #{reason}"}
    end
  end
end

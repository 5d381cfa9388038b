defmodule Mix.HrwNative.TLS do
  @max_bundle_bytes 2 * 1024 * 1024

  @moduledoc """
  The download's TLS options: the chain verified against the OS's CA store or the
  bundle given (`read_pem/1`); a host name sent as SNI and matched against DNS
  names, an IP literal sent as no SNI and matched against IP addresses.
  """

  alias Mix.HrwNative.Wire

  @doc """
  The `ssl` options for a request to `url` (a `Mix.HrwNative.Wire.url/0`):
  none for plain http. `opts.cacerts` are the DER certificates to trust, nil for
  the OS's store.
  """
  @spec options(Wire.url(), map()) :: {:ok, [term()]} | {:unavailable, String.t()}
  def options(%{scheme: "https", host: host}, opts) do
    with {:ok, cacerts} <- cacerts(opts) do
      # The alert is in the result's message: ssl need not log it too.
      {:ok,
       [cacerts: cacerts, verify: :verify_peer, depth: 4, log_level: :none] ++ peer_check(host)}
    end
  end

  def options(_url, _opts), do: {:ok, []}

  # A host name goes out as SNI and is matched against DNS names. An IP literal
  # must not be sent as SNI (RFC 6066, 3); with SNI disabled ssl checks no name,
  # so verify_peer_ip/3 matches the certificate's IP addresses itself.
  defp peer_check(host) do
    case Wire.ip_literal(host) do
      {:ok, ip} ->
        [server_name_indication: :disable, verify_fun: {&__MODULE__.verify_peer_ip/3, ip}]

      :error ->
        [
          server_name_indication: :binary.bin_to_list(host),
          customize_hostname_check: [
            match_fun: :public_key.pkix_verify_hostname_match_fun(:https)
          ]
        ]
    end
  end

  @doc false
  # ssl's verify_fun for an IP-literal host: the chain's own checks as ssl's
  # default function makes them, then the peer certificate's IP addresses.
  @spec verify_peer_ip(term(), term(), :inet.ip_address()) ::
          {:valid, term()} | {:fail, term()} | {:unknown, term()}
  def verify_peer_ip(_cert, {:bad_cert, reason}, _ip), do: {:fail, reason}
  def verify_peer_ip(_cert, {:extension, _}, ip), do: {:unknown, ip}
  def verify_peer_ip(_cert, :valid, ip), do: {:valid, ip}

  def verify_peer_ip(cert, :valid_peer, ip) do
    if :public_key.pkix_verify_hostname(cert, ip: ip),
      do: {:valid, ip},
      else: {:fail, :hostname_check_failed}
  end

  defp cacerts(%{cacerts: [_ | _] = cacerts}), do: {:ok, cacerts}

  defp cacerts(_opts) do
    {:ok, :public_key.cacerts_get()}
  rescue
    error ->
      {:unavailable,
       "no CA certificates to verify the server with (#{Exception.message(error)}); " <>
         "set HRW_NATIVE_CACERTS_PATH to a PEM file"}
  end

  @doc """
  The DER certificates of the PEM file `path`, of at most
  #{div(@max_bundle_bytes, 1024 * 1024)} MiB (an OS's whole store is about 0.2 MiB);
  an error naming the file when it cannot be read or holds none.
  """
  @spec read_pem(Path.t()) :: {:ok, [binary()]} | {:error, String.t()}
  def read_pem(path) do
    :ok = Mix.HrwNative.OTPApps.on_code_path([:crypto, :asn1, :public_key])

    with {:ok, text} <- Mix.HrwNative.SafeFile.read(path, @max_bundle_bytes),
         [_ | _] = certs <-
           for({:Certificate, der, :not_encrypted} <- safe_pem_decode(text), do: der) do
      {:ok, certs}
    else
      {:error, :enoent} -> {:error, "#{path} does not exist"}
      {:error, reason} -> {:error, reason}
      [] -> {:error, "#{path} holds no PEM certificate"}
    end
  end

  defp safe_pem_decode(text) do
    :public_key.pem_decode(text)
  rescue
    _ -> []
  end
end

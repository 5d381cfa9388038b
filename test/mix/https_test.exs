defmodule Mix.HrwNative.HttpsTest do
  # Archives served over TLS on loopback, with a CA and certificates made here
  # (OTP's :public_key): the compile task reaches them through
  # HRW_NATIVE_CACERTS_PATH, by DNS name and by IP address, and refuses a wrong
  # name, an untrusted CA and a redirect down to plain http.
  use ExUnit.Case, async: false
  @moduletag :integration

  import HRW.Test.NativeMirror

  setup do
    tls_case()
  end

  defp https(c, cert, opts \\ []),
    do: serve([tls: c.certs[cert], routes: c.routes] ++ opts)

  defp install(c, base, overrides \\ []),
    do: obtain(c, [base_url: base <> "/m", cacerts: c.certs.cacerts] ++ overrides)

  test "a certificate is accepted by its DNS name and by its IP address", c do
    for base <- [
          https(c, :good, host: "localhost"),
          https(c, :good),
          https(c, :good, ip: {0, 0, 0, 0, 0, 0, 0, 1})
        ] do
      File.rm_rf!(c.cache_dir)
      File.rm_rf!(c.dest)
      assert install(c, base) == :ok, base
      assert File.read!(c.dest) == c.fixture.library
      assert_received {:mix_shell, :info, ["Installed the precompiled hrw NIF " <> said]}
      assert said =~ "from #{base}/m/"
    end
  end

  test "a certificate for another name or address is refused, even with cargo", c do
    for base <- [https(c, :wrong, host: "localhost"), https(c, :wrong)] do
      message = mix_error(fn -> install(c, base, cargo: c.fake_cargo) end)

      assert message =~ "refusing the precompiled hrw NIF: the TLS handshake with #{base}",
             message

      assert message =~ "hostname_check_failed" or message =~ "Hostname", message
    end

    refute File.exists?(c.dest)
    assert cargo_args(c) == nil
  end

  test "a certificate from a CA that is not trusted is refused", c do
    for base <- [https(c, :untrusted, host: "localhost"), https(c, :untrusted)] do
      message = mix_error(fn -> install(c, base, cargo: c.fake_cargo) end)
      assert message =~ ~r"the TLS handshake with #{base}/m/\S+ failed", message
      assert message =~ "Unknown CA" or message =~ "unknown_ca", message
    end

    refute File.exists?(c.dest)
    assert cargo_args(c) == nil
  end

  test "a redirect from https to plain http is refused; one to https names its target", c do
    plain = serve(routes: c.routes)
    tls = https(c, :good)

    down =
      serve(
        tls: c.certs.good,
        handler: fn "/m/" <> name -> redirect("#{plain}/m/#{name}") end
      )

    message = mix_error(fn -> install(c, down, cargo: c.fake_cargo) end)
    assert message =~ "redirects to #{plain}/m/#{c.fixture.name}, from https to plain http"
    refute File.exists?(c.dest)
    assert cargo_args(c) == nil

    # https to https: followed, and the message names the URL the archive came from.
    up = serve(tls: c.certs.good, handler: fn "/m/" <> name -> redirect("#{tls}/m/#{name}") end)
    assert install(c, up) == :ok
    assert_received {:mix_shell, :info, ["Installed the precompiled hrw NIF " <> said]}
    assert said =~ "from #{tls}/m/#{c.fixture.name}"
  end

  test "the CA bundle is read once, when the settings are, and is bounded", c do
    mirror = https(c, :good)
    bundle = Path.join(c.case_dir, "bundle.pem")
    File.cp!(c.certs.ca_file, bundle)
    options = Mix.Tasks.Compile.HrwNative.options(%{"HRW_NATIVE_CACERTS_PATH" => bundle})
    assert options.cacerts == [c.certs.ca]

    # Gone by the time of the download: what was read is what is used.
    File.rm!(bundle)
    assert obtain(c, base_url: mirror <> "/m", cacerts: options.cacerts) == :ok

    pem = File.read!(c.certs.ca_file)
    File.write!(bundle, String.duplicate(pem, div(2 * 1024 * 1024, byte_size(pem)) + 1))

    message =
      mix_error(fn ->
        Mix.Tasks.Compile.HrwNative.options(%{"HRW_NATIVE_CACERTS_PATH" => bundle})
      end)

    assert message =~ "HRW_NATIVE_CACERTS_PATH must be a PEM file of CA certificates", message
    assert message =~ "over the 2097152-byte limit", message
  end
end

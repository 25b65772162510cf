# frozen_string_literal: true

# dalli_write.rb — write keys through the real Dalli client for
# test/integration/ring_compat.py.
#
#   ruby dalli_write.rb KEYFILE OUTFILE [--namespace NS] [--binary] SERVER...
#
# KEYFILE holds one hex-encoded key per line.  Each key is decoded, tagged
# UTF-8 (or left binary with --binary, so Dalli counts bytes, not
# characters) and stored with set(key, "v", 0, raw: true).  OUTFILE gets one
# line per key: the hex of the key Dalli actually stores and routes on
# (KeyManager#validate_key: namespace and long-key digest applied), a tab,
# and OK or ERR.  This script only drives the client; deciding where keys
# should be is the C code's job and checking it is the Python side's.

require 'dalli'
require 'logger'

Dalli.logger = Logger.new(nil)

keyfile, outfile, *rest = ARGV
namespace = nil
binary = false
servers = []
until rest.empty?
  arg = rest.shift
  case arg
  when '--namespace' then namespace = rest.shift
  when '--binary' then binary = true
  else servers << arg
  end
end

opts = { failover: true, socket_timeout: 1.0 }
opts[:namespace] = namespace if namespace
client = Dalli::Client.new(servers, opts)

# Dalli 3.0.x keeps the transformation in a KeyManager; older and newer
# versions may not, in which case the Python side skips that comparison.
key_manager = client.instance_variable_get(:@key_manager)

File.open(outfile, 'wb') do |out|
  File.foreach(keyfile) do |line|
    key = [line.strip].pack('H*')
    key = binary ? key.b : key.force_encoding(Encoding::UTF_8)
    stored = key_manager ? key_manager.validate_key(key).b.unpack1('H*') : '?'
    status =
      begin
        client.set(key, 'v', 0, raw: true) ? 'OK' : 'ERR'
      rescue Dalli::DalliError, ArgumentError => e
        "ERR #{e.class}"
      end
    out.write("#{stored}\t#{status}\n")
  end
end

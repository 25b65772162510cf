# frozen_string_literal: true

# dalli_rw.rb — the Ruby Dalli side of test/integration/ring_clients.py.
#
#   ruby dalli_rw.rb write|read [--namespace NS] SERVER... < KEYS
#
# KEYS: one hex-encoded key per line (decoded, tagged UTF-8).
# write: set(key, "dalli:" + hex, 0, raw: true) for every key; prints the
#        number of keys stored.
# read:  get_multi over all keys; prints one line per key found: hex, a tab,
#        the value.
require 'dalli'
require 'logger'

Dalli.logger = Logger.new(nil)

mode, *rest = ARGV
namespace = nil
servers = []
until rest.empty?
  arg = rest.shift
  if arg == '--namespace'
    namespace = rest.shift
  else
    servers << arg
  end
end
opts = { socket_timeout: 2.0 }
opts[:namespace] = namespace if namespace
client = Dalli::Client.new(servers, opts)
keys = $stdin.each_line.map { |l| [l.strip].pack('H*').force_encoding(Encoding::UTF_8) }

case mode
when 'write'
  stored = keys.count { |k| client.set(k, "dalli:#{k.b.unpack1('H*')}", 0, raw: true) }
  puts stored
when 'read'
  keys.each_slice(500) do |slice|
    client.get_multi(slice).each do |k, v|
      puts "#{k.b.unpack1('H*')}\t#{v}"
    end
  end
else
  abort "usage: dalli_rw.rb write|read [--namespace NS] SERVER..."
end

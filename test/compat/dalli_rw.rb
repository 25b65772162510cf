# frozen_string_literal: true

# dalli_rw.rb — the Ruby Dalli side of test/integration/ring_clients.py and
# batch_clients.py.
#
#   ruby dalli_rw.rb write|read [--namespace NS] [--hex] SERVER... < KEYS
#
# KEYS: one hex-encoded key per line (decoded, tagged UTF-8).
# write: set(key, "dalli:" + hex, 0, raw: true) for every key; prints the
#        number of keys stored.
# read:  get_multi over all keys (get for keys Dalli digests); prints one
#        line per key found: hex, a tab, the value (--hex: the value's
#        hex, for values that hold tabs, newlines or any byte).
require 'dalli'
require 'logger'

Dalli.logger = Logger.new(nil)

mode, *rest = ARGV
namespace = nil
hex = false
servers = []
until rest.empty?
  arg = rest.shift
  case arg
  when '--namespace' then namespace = rest.shift
  when '--hex' then hex = true
  else servers << arg
  end
end
show = ->(v) { hex ? v.b.unpack1('H*') : v }
opts = { socket_timeout: 2.0 }
opts[:namespace] = namespace if namespace
client = Dalli::Client.new(servers, opts)
keys = $stdin.each_line.map { |l| [l.strip].pack('H*').force_encoding(Encoding::UTF_8) }

case mode
when 'write'
  stored = keys.count { |k| client.set(k, "dalli:#{k.b.unpack1('H*')}", 0, raw: true) }
  puts stored
when 'read'
  # Dalli's get_multi names a key it digested (over 250 characters with the
  # namespace) by its digest in the result, so those are read one by one
  ns_len = namespace ? namespace.length + 1 : 0
  long, short = keys.partition { |k| ns_len + k.length > 250 }
  short.each_slice(500) do |slice|
    client.get_multi(slice).each do |k, v|
      puts "#{k.b.unpack1('H*')}\t#{show.(v)}"
    end
  end
  long.each do |k|
    v = client.get(k, raw: true)
    puts "#{k.b.unpack1('H*')}\t#{show.(v)}" unless v.nil?
  end
else
  abort "usage: dalli_rw.rb write|read [--namespace NS] [--hex] SERVER..."
end

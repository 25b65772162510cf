# frozen_string_literal: true

# dalli_values.rb — the Ruby Dalli side of test/integration/app_values.py:
# values as a Rails cache writes them (compressed over a threshold, Marshal
# or JSON serialized, in a namespace).
#
#   ruby dalli_values.rb MODE [--namespace NS] [--min BYTES] SERVER < LINES
#
# LINES: "<key hex> <value hex>" (write modes) or "<key hex>" (read).
# write:         set(key, value, 0, raw: true); prints the number stored.
# write_marshal: set(key, value) with the default serializer (Marshal);
#                prints "<key hex> <Marshal.dump(value) hex>" per key.
# write_json:    a client with serializer: JSON stores {"hex" => value hex};
#                prints the number stored.
# read:          get(key); prints "<key hex> <value hex>", or "<key hex> -"
#                for a miss.
# Compression is on (compress: true) with compression_min_size BYTES
# (Dalli's default, 4096, unless --min is given).
require 'dalli'
require 'json'
require 'logger'

Dalli.logger = Logger.new(nil)

mode, *rest = ARGV
opts = { socket_timeout: 2.0, compress: true }
servers = []
until rest.empty?
  arg = rest.shift
  case arg
  when '--namespace' then opts[:namespace] = rest.shift
  when '--min' then opts[:compression_min_size] = Integer(rest.shift)
  else servers << arg
  end
end
opts[:serializer] = JSON if mode == 'write_json'
client = Dalli::Client.new(servers, opts)
lines = $stdin.each_line.map { |l| l.split.map { |h| [h].pack('H*') } }

case mode
when 'write'
  puts(lines.count { |k, v| client.set(k, v, 0, raw: true) })
when 'write_marshal'
  lines.each do |k, v|
    v = v.force_encoding(Encoding::UTF_8)
    client.set(k, v)
    puts "#{k.unpack1('H*')} #{Marshal.dump(v).unpack1('H*')}"
  end
when 'write_json'
  puts(lines.count { |k, v| client.set(k, { 'hex' => v.unpack1('H*') }) })
when 'read'
  lines.each do |(k)|
    v = client.get(k)
    puts "#{k.unpack1('H*')} #{v.nil? ? '-' : v.b.unpack1('H*')}"
  end
else
  abort "unknown mode #{mode}"
end

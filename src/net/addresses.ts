import ipaddr from 'ipaddr.js';

/**
 * Which IP addresses a webhook may be sent to. Pure: configuration warns with
 * it and delivery's address guard refuses connections with it.
 */

/**
 * Cloud metadata and credential endpoints. Refused always, whatever
 * network.allowPrivateAddresses says, in every IPv6 form that carries them: a
 * webhook URL must never be a way to read the instance's credentials.
 */
const METADATA: ReadonlyArray<[ipaddr.IPv4 | ipaddr.IPv6, number]> = [
  // AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean, Hetzner and most others.
  '169.254.169.254/32',
  // AWS ECS task credentials and EKS Pod Identity.
  '169.254.170.2/32',
  '169.254.170.23/32',
  // Tencent Cloud.
  '169.254.0.23/32',
  // Alibaba Cloud.
  '100.100.100.200/32',
  // Azure WireServer (certificates and extension settings of the VM).
  '168.63.129.16/32',
  // Oracle Cloud Classic.
  '192.0.0.192/32',
  // AWS on IPv6: instance metadata and EKS Pod Identity.
  'fd00:ec2::254/128',
  'fd00:ec2::23/128',
].map((cidr) => ipaddr.parseCIDR(cidr));

/**
 * The ipaddr.js range names that are public, routable unicast. Every other
 * range (loopback, private, linkLocal, uniqueLocal, carrierGradeNat,
 * unspecified, multicast, broadcast, reserved, ...) is refused unless private
 * addresses are allowed: an allow-list, so a range ipaddr.js learns later is
 * refused until someone decides otherwise.
 */
const PUBLIC_RANGES: ReadonlySet<string> = new Set(['unicast']);

/** What {@link refusal} says of a cloud metadata address. */
export const METADATA_REFUSAL = 'cloud metadata address';

/**
 * IPv6 prefixes whose addresses carry an IPv4 address that the packets end up
 * at, with where the IPv4 address sits (byte offsets of the 16 bytes):
 * IPv4-mapped, IPv4-translated (RFC 6145), IPv4-compatible (::/96, deprecated
 * but still routed by some stacks), NAT64 with the well-known prefix (RFC
 * 6052) and 6to4 (RFC 3056).
 */
const EMBEDDINGS: ReadonlyArray<{ prefix: [ipaddr.IPv6, number]; at: readonly number[] }> = [
  { prefix: v6('::ffff:0:0/96'), at: [12, 13, 14, 15] },
  { prefix: v6('::ffff:0:0:0/96'), at: [12, 13, 14, 15] },
  { prefix: v6('::/96'), at: [12, 13, 14, 15] },
  { prefix: v6('64:ff9b::/96'), at: [12, 13, 14, 15] },
  { prefix: v6('2002::/16'), at: [2, 3, 4, 5] },
];

/**
 * The local-use NAT64 prefix (RFC 8215). The operator picks the prefix length
 * within it, so the IPv4 address may sit at any of RFC 6052's positions for a
 * /48, /56, /64 or /96 prefix (bits 64 to 71 are always zero and skipped).
 */
const LOCAL_NAT64 = v6('64:ff9b:1::/48');
const LOCAL_NAT64_POSITIONS: ReadonlyArray<readonly number[]> = [
  [6, 7, 9, 10],
  [7, 9, 10, 11],
  [9, 10, 11, 12],
  [12, 13, 14, 15],
];

/** Teredo (RFC 4380): the client's IPv4 address, each bit inverted, in the last 32 bits. */
const TEREDO = v6('2001::/32');

function v6(cidr: string): [ipaddr.IPv6, number] {
  return ipaddr.IPv6.parseCIDR(cidr);
}

/**
 * Why the IP address may not be connected to, or null when it may.
 *
 * - An IPv6 address that carries an IPv4 address (IPv4-mapped, -translated or
 *   -compatible, NAT64, 6to4, Teredo) is judged as the IPv4 address it
 *   carries: that is where the packets go.
 * - A cloud metadata address is refused always ('cloud metadata address'),
 *   in every such form.
 * - Unless allowPrivate: anything but public unicast is refused, named by its
 *   ipaddr.js range: loopback, private (10/8, 172.16/12, 192.168/16),
 *   linkLocal, uniqueLocal, carrierGradeNat, unspecified, multicast,
 *   broadcast, reserved, and an address of the local-use NAT64 prefix, which
 *   is not routed beyond its network ('rfc6052').
 * - Something that is not an IP address is refused ('not an IP address').
 */
export function refusal(address: string, allowPrivate: boolean): string | null {
  if (!ipaddr.isValid(address)) return 'not an IP address';
  const parsed = ipaddr.parse(address);
  const judged = parsed.kind() === 'ipv6' ? carried(parsed as ipaddr.IPv6) : [parsed];
  if (judged.some(isMetadata)) return METADATA_REFUSAL;
  if (allowPrivate) return null;
  for (const candidate of judged) {
    const range = candidate.range();
    if (!PUBLIC_RANGES.has(range)) return range;
  }
  return null;
}

/**
 * The addresses an IPv6 address stands for: the IPv4 address it carries
 * (several candidates for the local-use NAT64 prefix, whose embedding the
 * operator chooses), else itself. `::` and `::1` are themselves, not IPv4.
 */
function carried(address: ipaddr.IPv6): Array<ipaddr.IPv4 | ipaddr.IPv6> {
  const bytes = address.toByteArray();
  const range = address.range();
  if (range === 'unspecified' || range === 'loopback') return [address];
  const ipv4 = (at: readonly number[], flip = 0): ipaddr.IPv4 =>
    new ipaddr.IPv4(at.map((index) => bytes[index]! ^ flip));
  if (address.match(LOCAL_NAT64)) {
    // Refused as a range of its own unless private addresses are allowed; metadata in any position.
    return [address, ...LOCAL_NAT64_POSITIONS.map((at) => ipv4(at))];
  }
  if (address.match(TEREDO)) return [ipv4([12, 13, 14, 15], 0xff)];
  const embedding = EMBEDDINGS.find(({ prefix }) => address.match(prefix));
  return embedding ? [ipv4(embedding.at)] : [address];
}

function isMetadata(address: ipaddr.IPv4 | ipaddr.IPv6): boolean {
  return METADATA.some(([network, bits]) => address.kind() === network.kind() && address.match(network, bits));
}

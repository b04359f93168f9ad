package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Node kinds and edge kinds of the topology.
const (
	NodeSubnet   = "subnet"
	NodeGateway  = "gateway"
	NodeAsset    = "asset"
	NodeNeighbor = "neighbor"
	EdgeMember   = "member"
	EdgeRoute    = "gateway"
	EdgeLLDP     = "lldp"
)

// DiscoveryTopologyNode is a subnet, a gateway, an asset, or an LLDP neighbour of an asset
// that discovery has not found as an asset.
type DiscoveryTopologyNode struct {
	ID    string `json:"id" doc:"subnet:<cidr>, gateway:<ip>, asset:<assetId> or neighbor:<chassisId>."`
	Kind  string `json:"kind" enum:"subnet,gateway,asset,neighbor"`
	Label string `json:"label"`
	// AssetID is the asset of an asset node, and of a gateway discovery found as an asset.
	AssetID *string `json:"assetId" format:"uuid"`
	IP      string  `json:"ip,omitempty"`
	Type    string  `json:"type,omitempty" doc:"An asset's type."`
	Status  string  `json:"status,omitempty" doc:"An asset's status."`
}

// DiscoveryTopologyEdge joins two nodes: an asset to its subnet (member), a subnet to a
// gateway that routes it (gateway), an asset to an LLDP neighbour on one of its ports (lldp).
type DiscoveryTopologyEdge struct {
	From string `json:"from"`
	To   string `json:"to"`
	Kind string `json:"kind" enum:"member,gateway,lldp"`
	// FromPort and ToPort are the ports of an lldp edge: the asset's, and the neighbour's.
	FromPort string `json:"fromPort,omitempty"`
	ToPort   string `json:"toPort,omitempty"`
}

// DiscoveryTopology is what discovery learned of an organization's or a site's networks.
type DiscoveryTopology struct {
	Nodes []DiscoveryTopologyNode `json:"nodes"`
	Edges []DiscoveryTopologyEdge `json:"edges"`
	// Truncated says assets past MaxTopologyAssets were left out.
	Truncated bool `json:"truncated"`
}

// TopologyFilter says whose topology: an organization's or a site's (one is required of a
// caller above an organization).
type TopologyFilter struct {
	OrgID  string
	SiteID string
}

// Topology builds the topology from the profiles' subnets, the routes the scanning agents
// reported, and the assets: each asset joins the narrowest known subnet holding its address;
// each subnet joins the gateways of the routes through it (a gateway on a directly attached
// network joins that network), and a gateway that is an asset is that asset; each asset joins
// the LLDP neighbours on its ports, which are assets when their management address, MAC
// address or name is one's.
func (s *Service) Topology(ctx context.Context, f TopologyFilter) (DiscoveryTopology, error) {
	scope := access.ScopeFrom(ctx)
	if f.OrgID == "" && f.SiteID == "" {
		if scope.Level != access.LevelOrganization {
			return DiscoveryTopology{}, apperr.Invalid("orgId", "name orgId or siteId")
		}
		f.OrgID = scope.OrgID
	}
	if f.OrgID != "" {
		if _, err := s.tenancy.GetOrganization(ctx, f.OrgID); err != nil {
			return DiscoveryTopology{}, fmt.Errorf("load organization %s: %w", f.OrgID, err)
		}
	}
	if f.SiteID != "" {
		if _, err := s.tenancy.GetSite(ctx, f.SiteID); err != nil {
			return DiscoveryTopology{}, fmt.Errorf("load site %s: %w", f.SiteID, err)
		}
	}
	var a store.Args
	conds := []string{scope.OrgFilter(&a, "x.org_id", "x.partner_id"), tenancy.LiveOrg("x.org_id")}
	if f.OrgID != "" {
		conds = append(conds, "x.org_id = "+a.Add(f.OrgID))
	}
	if f.SiteID != "" {
		conds = append(conds, "x.site_id = "+a.Add(f.SiteID))
	}
	where := store.Where(conds)
	subnets := map[netip.Prefix]bool{}
	rawSubnets, err := store.QueryStrings(ctx, s.db, `SELECT x.subnets FROM discovery_profiles x WHERE `+where, a.Values()...)
	if err != nil {
		return DiscoveryTopology{}, fmt.Errorf("read the subnets of the profiles: %w", err)
	}
	for _, raw := range rawSubnets {
		var list []string
		if err := json.Unmarshal([]byte(raw), &list); err != nil {
			return DiscoveryTopology{}, fmt.Errorf("read the subnets of a profile: %w", err)
		}
		for _, sn := range list {
			if p, err := netip.ParsePrefix(sn); err == nil {
				subnets[p] = true
			}
		}
	}
	type storedRoute struct{ subnet, gateway string }
	stored, err := store.QueryAll(ctx, s.db, `SELECT x.subnet, x.gateway FROM discovery_routes x WHERE `+where, a.Values(),
		func(row store.Scanner) (storedRoute, error) {
			var r storedRoute
			return r, row.Scan(&r.subnet, &r.gateway)
		})
	if err != nil {
		return DiscoveryTopology{}, fmt.Errorf("read the routes: %w", err)
	}
	type route struct {
		subnet  netip.Prefix
		gateway string
	}
	routes := make([]route, 0, len(stored))
	for _, r := range stored {
		p, err := netip.ParsePrefix(r.subnet)
		if err != nil {
			continue
		}
		if p.Bits() > 0 {
			subnets[p] = true
		}
		routes = append(routes, route{p, r.gateway})
	}
	assets, err := store.QueryAll(ctx, s.db, `SELECT `+assetColumns+` FROM discovery_assets x WHERE `+where+
		` ORDER BY x.ip_key, x.id LIMIT `+fmt.Sprint(MaxTopologyAssets+1), a.Values(), scanAsset)
	if err != nil {
		return DiscoveryTopology{}, fmt.Errorf("read the assets: %w", err)
	}
	t := DiscoveryTopology{Nodes: []DiscoveryTopologyNode{}, Edges: []DiscoveryTopologyEdge{}}
	if len(assets) > MaxTopologyAssets {
		assets, t.Truncated = assets[:MaxTopologyAssets], true
	}
	ordered := make([]netip.Prefix, 0, len(subnets))
	for p := range subnets {
		ordered = append(ordered, p)
	}
	// Narrowest first, so an address joins the most specific subnet holding it.
	sort.Slice(ordered, func(i, j int) bool {
		if ordered[i].Bits() != ordered[j].Bits() {
			return ordered[i].Bits() > ordered[j].Bits()
		}
		return ordered[i].Addr().Less(ordered[j].Addr())
	})
	subnetOf := func(ip string) (netip.Prefix, bool) {
		addr, err := netip.ParseAddr(ip)
		if err != nil {
			return netip.Prefix{}, false
		}
		for _, p := range ordered {
			if p.Contains(addr) {
				return p, true
			}
		}
		return netip.Prefix{}, false
	}
	for _, p := range ordered {
		t.Nodes = append(t.Nodes, DiscoveryTopologyNode{ID: "subnet:" + p.String(), Kind: NodeSubnet, Label: p.String()})
	}
	assetNode := map[string]string{}
	for _, x := range assets {
		id := "asset:" + x.ID
		assetNode[x.IP] = id
		label := x.IP
		if x.Hostname != "" {
			label = x.Hostname + " (" + x.IP + ")"
		}
		t.Nodes = append(t.Nodes, DiscoveryTopologyNode{ID: id, Kind: NodeAsset, Label: label, AssetID: &x.ID, IP: x.IP, Type: x.Type,
			Status: x.Status})
		if p, ok := subnetOf(x.IP); ok {
			t.Edges = append(t.Edges, DiscoveryTopologyEdge{From: id, To: "subnet:" + p.String(), Kind: EdgeMember})
		}
	}
	edges := map[DiscoveryTopologyEdge]bool{}
	for _, r := range routes {
		if r.gateway == "" {
			continue
		}
		gw, ok := assetNode[r.gateway]
		if !ok {
			gw = "gateway:" + r.gateway
			assetNode[r.gateway] = gw
			t.Nodes = append(t.Nodes, DiscoveryTopologyNode{ID: gw, Kind: NodeGateway, Label: r.gateway, IP: r.gateway})
		}
		// The network the gateway sits on reaches it, and so does the routed network.
		from := []netip.Prefix{}
		if p, ok := subnetOf(r.gateway); ok {
			from = append(from, p)
		}
		if r.subnet.Bits() > 0 {
			from = append(from, r.subnet)
		}
		for _, p := range from {
			e := DiscoveryTopologyEdge{From: "subnet:" + p.String(), To: gw, Kind: EdgeRoute}
			if !edges[e] {
				edges[e] = true
				t.Edges = append(t.Edges, e)
			}
		}
	}
	t.Nodes, t.Edges = linkNeighbors(assets, assetNode, t.Nodes, t.Edges)
	return t, nil
}

// linkNeighbors adds the edges between assets and their LLDP neighbours. Two systems that see
// each other make one edge, from the first asset (by address).
func linkNeighbors(assets []DiscoveryAsset, byIP map[string]string, nodes []DiscoveryTopologyNode,
	edges []DiscoveryTopologyEdge) ([]DiscoveryTopologyNode, []DiscoveryTopologyEdge) {
	byMAC, byName := map[string]string{}, map[string]string{}
	for _, x := range assets {
		id := "asset:" + x.ID
		if x.MAC != "" {
			byMAC[x.MAC] = id
		}
		for _, name := range []string{x.SysName, x.Hostname} {
			if name != "" {
				byName[strings.ToLower(name)] = id
			}
		}
	}
	type pair struct{ a, b string }
	seen := map[pair]bool{}
	added := map[string]bool{}
	for _, x := range assets {
		from := "asset:" + x.ID
		for _, n := range x.Neighbors {
			to := ""
			switch {
			case n.Address != "" && byIP[n.Address] != "":
				to = byIP[n.Address]
			case n.ChassisIDType == "mac" && byMAC[n.ChassisID] != "":
				to = byMAC[n.ChassisID]
			case n.SysName != "" && byName[strings.ToLower(n.SysName)] != "":
				to = byName[strings.ToLower(n.SysName)]
			default:
				to = "neighbor:" + n.ChassisID
				if !added[to] {
					added[to] = true
					label := n.SysName
					if label == "" {
						label = n.ChassisID
					}
					nodes = append(nodes, DiscoveryTopologyNode{ID: to, Kind: NodeNeighbor, Label: label, IP: n.Address})
				}
			}
			if to == from || seen[pair{from, to}] || seen[pair{to, from}] {
				continue
			}
			seen[pair{from, to}] = true
			port := n.PortDesc
			if n.PortID != "" {
				port = n.PortID
			}
			edges = append(edges, DiscoveryTopologyEdge{From: from, To: to, Kind: EdgeLLDP, FromPort: n.LocalPort, ToPort: port})
		}
	}
	return nodes, edges
}

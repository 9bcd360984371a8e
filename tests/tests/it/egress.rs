//! The fixed egress option of the template: with `FixedEgress` enabled, the functions that
//! call receivers (deliver, probe) run in private subnets of two zones, each routed through a
//! NAT gateway of its zone with an Elastic IP, and the addresses are the stack's output. Off
//! by default, it creates nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::infra::template;
use serde_yaml::Value;

fn tagged<'a>(v: &'a Value, tag: &str) -> &'a Value {
    match v {
        Value::Tagged(t) if t.tag == tag => &t.value,
        other => panic!("not {tag}: {other:?}"),
    }
}

fn reference(v: &Value) -> String {
    tagged(v, "!Ref").as_str().unwrap().to_owned()
}

#[test]
fn fixed_egress_puts_the_callers_of_receivers_behind_two_nat_addresses() {
    let t = template();
    let res = &t["Resources"];
    assert_eq!(t["Parameters"]["FixedEgress"]["Default"], "disabled");
    // Every resource of the option is under its condition.
    let egress: Vec<&str> = res
        .as_mapping()
        .unwrap()
        .keys()
        .filter_map(|k| k.as_str())
        .filter(|k| k.starts_with("Egress"))
        .collect();
    assert!(egress.len() >= 20, "{egress:?}");
    for name in &egress {
        assert_eq!(res[*name]["Condition"], "FixedEgressOn", "{name}");
    }
    for function in ["DeliverFunction", "ProbeFunction"] {
        let choice = tagged(&res[function]["Properties"]["VpcConfig"], "!If");
        assert_eq!(choice[0], "FixedEgressOn", "{function}");
        let subnets: Vec<String> = choice[1]["SubnetIds"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(reference)
            .collect();
        assert_eq!(subnets, ["EgressPrivateSubnetA", "EgressPrivateSubnetB"]);
        assert_eq!(reference(&choice[2]), "AWS::NoValue");
    }
    // Each private subnet leaves through the NAT gateway of its own zone, which sends from its
    // own Elastic IP in a public subnet of that zone.
    for zone in ["A", "B"] {
        let assoc = &res[format!("EgressPrivateSubnet{zone}Routes").as_str()]["Properties"];
        assert_eq!(
            reference(&assoc["SubnetId"]),
            format!("EgressPrivateSubnet{zone}")
        );
        let table = reference(&assoc["RouteTableId"]);
        let route = &res[format!("EgressPrivateDefaultRoute{zone}").as_str()]["Properties"];
        assert_eq!(reference(&route["RouteTableId"]), table);
        assert_eq!(route["DestinationCidrBlock"], "0.0.0.0/0");
        let nat = reference(&route["NatGatewayId"]);
        assert_eq!(nat, format!("EgressNat{zone}"));
        let nat = &res[nat.as_str()]["Properties"];
        assert_eq!(
            reference(&nat["SubnetId"]),
            format!("EgressPublicSubnet{zone}")
        );
        let allocation = tagged(&nat["AllocationId"], "!GetAtt").as_str().unwrap();
        assert_eq!(allocation, format!("EgressAddress{zone}.AllocationId"));
        let zone_of = |subnet: &str| res[subnet]["Properties"]["AvailabilityZone"].clone();
        assert_eq!(
            zone_of(&format!("EgressPrivateSubnet{zone}")),
            zone_of(&format!("EgressPublicSubnet{zone}"))
        );
    }
    // The tables are reached without the NAT gateways' charge.
    let endpoint = &res["EgressDynamoDbEndpoint"]["Properties"];
    assert_eq!(endpoint["VpcEndpointType"], "Gateway");
    assert_eq!(endpoint["RouteTableIds"].as_sequence().unwrap().len(), 2);
    // The addresses, for receivers to allowlist.
    let out = &t["Outputs"]["EgressAddresses"];
    assert_eq!(out["Condition"], "FixedEgressOn");
}

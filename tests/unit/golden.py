"""Golden vectors: real output of the Java NameServer (5.3.3 / HEAD, fastjson 1.2.83).

Copied verbatim from the namesrv reference (rocketmq-namesrv.md, Appendix A, produced by compiling
the real remoting/namesrv classes and driving DefaultRequestProcessor / ClientRequestProcessor) and
from the feasibility captures of real clients (feasibility.md §1.5). Every REQUEST header is what a
5.3.3 Java client encoded, every RESPONSE header what the Java NameServer answered.
"""

# ruff: noqa: E501 (the vectors are verbatim one-line golden texts)

from __future__ import annotations

# Every distinct `REQ hdr` of Appendix A (plus the oneway BROKER_HEARTBEAT of its stand-alone list).
REQUEST_HEADERS: tuple[str, ...] = (
    '{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":100,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":103,"extFields":{"brokerId":"0","bodyCrc32":"740481903","clusterName":"DefaultCluster","brokerAddr":"127.0.0.1:10911","enableActingMaster":"false","haServerAddr":"127.0.0.1:10912","compressed":"false","brokerName":"broker-a"},"flag":0,"language":"JAVA","opaque":101,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":100,"extFields":{"namespace":"ORDER_TOPIC_CONFIG","value":"broker-a:8","key":"TopicTest"},"flag":0,"language":"JAVA","opaque":102,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":100,"extFields":{"namespace":"ORDER_TOPIC_CONFIG"},"flag":0,"language":"JAVA","opaque":103,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":101,"extFields":{"namespace":"ORDER_TOPIC_CONFIG","key":"TopicTest"},"flag":0,"language":"JAVA","opaque":104,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":101,"extFields":{"namespace":"ORDER_TOPIC_CONFIG","key":"Nope"},"flag":0,"language":"JAVA","opaque":105,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":219,"extFields":{"namespace":"ORDER_TOPIC_CONFIG"},"flag":0,"language":"JAVA","opaque":106,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":219,"extFields":{"namespace":"NoSuchNs"},"flag":0,"language":"JAVA","opaque":107,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":103,"extFields":{"brokerId":"0","bodyCrc32":"740481903","clusterName":"DefaultCluster","brokerAddr":"127.0.0.1:10911","enableActingMaster":"false","haServerAddr":"127.0.0.1:10912","compressed":"false","brokerName":"broker-a"},"flag":0,"language":"JAVA","opaque":108,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":103,"extFields":{"brokerId":"1","bodyCrc32":"404451817","clusterName":"DefaultCluster","brokerAddr":"127.0.0.1:10921","enableActingMaster":"false","haServerAddr":"127.0.0.1:10922","compressed":"false","brokerName":"broker-a"},"flag":0,"language":"JAVA","opaque":109,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":103,"extFields":{"brokerId":"1","bodyCrc32":"1817574165","clusterName":"DefaultCluster","brokerAddr":"127.0.0.1:10921","enableActingMaster":"false","haServerAddr":"127.0.0.1:10922","compressed":"false","brokerName":"broker-a"},"flag":0,"language":"JAVA","opaque":110,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":103,"extFields":{"brokerId":"1","bodyCrc32":"404451817","clusterName":"DefaultCluster","brokerAddr":"127.0.0.1:10921","enableActingMaster":"false","haServerAddr":"127.0.0.1:10922","compressed":"false","brokerName":"broker-a"},"flag":0,"language":"JAVA","opaque":111,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":103,"extFields":{"brokerId":"0","bodyCrc32":"12345","clusterName":"DefaultCluster","brokerAddr":"127.0.0.1:10911","enableActingMaster":"false","haServerAddr":"127.0.0.1:10912","compressed":"false","brokerName":"broker-a"},"flag":0,"language":"JAVA","opaque":112,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":103,"extFields":{"brokerId":"0","bodyCrc32":"1694060984","clusterName":"DefaultCluster","brokerAddr":"127.0.0.2:10911","haServerAddr":"127.0.0.2:10912","compressed":"true","brokerName":"broker-b"},"flag":0,"language":"JAVA","opaque":113,"serializeTypeCurrentRPC":"JSON","version":409}',
    '{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":114,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":115,"serializeTypeCurrentRPC":"JSON","version":399}',
    '{"code":105,"extFields":{"topic":"TopicTest","acceptStandardJsonOnly":"true"},"flag":0,"language":"JAVA","opaque":116,"serializeTypeCurrentRPC":"JSON","version":0}',
    '{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":117,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":105,"extFields":{"__ZONE_MODE":"true","__ZONE_NAME":"zoneX","topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":118,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":106,"flag":0,"language":"JAVA","opaque":119,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":322,"extFields":{"brokerId":"0","clusterName":"DefaultCluster","brokerAddr":"127.0.0.1:10911","brokerName":"broker-a"},"flag":0,"language":"JAVA","opaque":120,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":322,"extFields":{"brokerId":"0","clusterName":"DefaultCluster","brokerAddr":"127.0.0.1:10911","brokerName":"broker-a"},"flag":0,"language":"JAVA","opaque":121,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":322,"extFields":{"brokerId":"0","clusterName":"C","brokerAddr":"9.9.9.9:1","brokerName":"x"},"flag":0,"language":"JAVA","opaque":122,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":904,"extFields":{"clusterName":"DefaultCluster","brokerAddr":"127.0.0.1:10911","brokerName":"broker-a"},"flag":0,"language":"JAVA","opaque":123,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":904,"extFields":{"clusterName":"DefaultCluster","brokerAddr":"127.0.0.1:10911","brokerName":"broker-a"},"flag":2,"language":"JAVA","opaque":124,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":901,"extFields":{"clusterName":"DefaultCluster","brokerName":"broker-a"},"flag":0,"language":"JAVA","opaque":125,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":901,"extFields":{"clusterName":"DefaultCluster","brokerName":"nope"},"flag":0,"language":"JAVA","opaque":126,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":206,"flag":0,"language":"JAVA","opaque":127,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":224,"extFields":{"cluster":"DefaultCluster"},"flag":0,"language":"JAVA","opaque":128,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":224,"extFields":{"cluster":"NoCluster"},"flag":0,"language":"JAVA","opaque":129,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":304,"flag":0,"language":"JAVA","opaque":130,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":311,"flag":0,"language":"JAVA","opaque":131,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":312,"flag":0,"language":"JAVA","opaque":132,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":313,"flag":0,"language":"JAVA","opaque":133,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":205,"extFields":{"brokerName":"broker-a"},"flag":0,"language":"JAVA","opaque":134,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":135,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":327,"extFields":{"brokerName":"broker-a"},"flag":0,"language":"JAVA","opaque":136,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":105,"extFields":{"topic":"TBW102"},"flag":0,"language":"JAVA","opaque":137,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":217,"extFields":{"topic":"NewTopic"},"flag":0,"language":"JAVA","opaque":138,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":105,"extFields":{"topic":"NewTopic"},"flag":0,"language":"JAVA","opaque":139,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":216,"extFields":{"clusterName":"DefaultCluster","topic":"NewTopic"},"flag":0,"language":"JAVA","opaque":140,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":105,"extFields":{"topic":"NewTopic"},"flag":0,"language":"JAVA","opaque":141,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":102,"extFields":{"namespace":"ORDER_TOPIC_CONFIG","key":"TopicTest"},"flag":0,"language":"JAVA","opaque":142,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":219,"extFields":{"namespace":"ORDER_TOPIC_CONFIG"},"flag":0,"language":"JAVA","opaque":143,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":318,"flag":0,"language":"JAVA","opaque":144,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":311,"flag":0,"language":"JAVA","opaque":145,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":318,"flag":0,"language":"JAVA","opaque":146,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":318,"flag":0,"language":"JAVA","opaque":147,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":319,"flag":0,"language":"JAVA","opaque":148,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":99999,"flag":0,"language":"JAVA","opaque":149,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":104,"extFields":{"brokerId":"0","clusterName":"DefaultCluster","brokerAddr":"127.0.0.1:10911","brokerName":"broker-a"},"flag":0,"language":"JAVA","opaque":150,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":151,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":106,"flag":0,"language":"JAVA","opaque":152,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":106,"flag":0,"language":"JAVA","opaque":153,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":103,"extFields":{"brokerId":"0","bodyCrc32":"1441612563","clusterName":"DefaultCluster","brokerAddr":"127.0.0.1:10911","enableActingMaster":"true","haServerAddr":"127.0.0.1:10912","compressed":"false","brokerName":"broker-a"},"flag":0,"language":"JAVA","opaque":154,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":103,"extFields":{"brokerId":"1","bodyCrc32":"1441612563","clusterName":"DefaultCluster","brokerAddr":"127.0.0.1:10921","enableActingMaster":"true","haServerAddr":"127.0.0.1:10922","compressed":"false","brokerName":"broker-a"},"flag":0,"language":"JAVA","opaque":155,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":156,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":157,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":106,"flag":0,"language":"JAVA","opaque":158,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":103,"extFields":{"brokerId":"1","bodyCrc32":"1091846958","clusterName":"DefaultCluster","brokerAddr":"127.0.0.1:10921","enableActingMaster":"true","haServerAddr":"127.0.0.1:10922","compressed":"false","brokerName":"broker-a"},"flag":0,"language":"JAVA","opaque":159,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":105,"extFields":{"topic":"NewOnSlave"},"flag":0,"language":"JAVA","opaque":160,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":103,"extFields":{"brokerId":"0","bodyCrc32":"1441612563","clusterName":"DefaultCluster","brokerAddr":"127.0.0.1:10911","enableActingMaster":"true","haServerAddr":"127.0.0.1:10912","compressed":"false","brokerName":"broker-a"},"flag":0,"language":"JAVA","opaque":161,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":162,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":904,"flag":2,"language":"JAVA","opaque":11,"serializeTypeCurrentRPC":"JSON","version":0}',
)

# Every distinct `RESP hdr` of Appendix A.
RESPONSE_HEADERS: tuple[str, ...] = (
    '{"code":17,"flag":1,"language":"JAVA","opaque":100,"remark":"No topic route info in name server for the topic: TopicTest\\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.","serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"extFields":{},"flag":1,"language":"JAVA","opaque":101,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":102,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":1,"flag":1,"language":"JAVA","opaque":103,"remark":"namespace or key is null","serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"extFields":{"value":"broker-a:8"},"flag":1,"language":"JAVA","opaque":104,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":22,"extFields":{},"flag":1,"language":"JAVA","opaque":105,"remark":"No config item, Namespace: ORDER_TOPIC_CONFIG Key: Nope","serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":106,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":22,"flag":1,"language":"JAVA","opaque":107,"remark":"No config item, Namespace: NoSuchNs","serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"extFields":{},"flag":1,"language":"JAVA","opaque":108,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":1,"extFields":{},"flag":1,"language":"JAVA","opaque":109,"remark":"register broker failed","serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"extFields":{"haServerAddr":"127.0.0.1:10912","masterAddr":"127.0.0.1:10911"},"flag":1,"language":"JAVA","opaque":110,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"extFields":{"haServerAddr":"127.0.0.1:10912","masterAddr":"127.0.0.1:10911"},"flag":1,"language":"JAVA","opaque":111,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":1,"extFields":{},"flag":1,"language":"JAVA","opaque":112,"remark":"crc32 not match","serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"extFields":{},"flag":1,"language":"JAVA","opaque":113,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":114,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":115,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":116,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":117,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":118,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":119,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"extFields":{"changed":"false"},"flag":1,"language":"JAVA","opaque":120,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"extFields":{"changed":"true"},"flag":1,"language":"JAVA","opaque":121,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"extFields":{"changed":"true"},"flag":1,"language":"JAVA","opaque":122,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":123,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":125,"remark":"not set any response code","serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":126,"remark":"not set any response code","serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":127,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":128,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":129,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":130,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":131,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":132,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":133,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"extFields":{"wipeTopicCount":"5"},"flag":1,"language":"JAVA","opaque":134,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":135,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"extFields":{"addTopicCount":"5"},"flag":1,"language":"JAVA","opaque":136,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":137,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":138,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":139,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":140,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":17,"flag":1,"language":"JAVA","opaque":141,"remark":"No topic route info in name server for the topic: NewTopic\\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.","serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":142,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":143,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":144,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":1,"flag":1,"language":"JAVA","opaque":145,"remark":"disable","serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":16,"flag":1,"language":"JAVA","opaque":146,"remark":"Can not update config in black list.","serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":16,"flag":1,"language":"JAVA","opaque":147,"remark":"Can not update config in black list.","serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":148,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":3,"flag":1,"language":"JAVA","opaque":149,"remark":" request type 99999 not supported","serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":150,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":151,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":152,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":153,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"extFields":{},"flag":1,"language":"JAVA","opaque":154,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"extFields":{"haServerAddr":"127.0.0.1:10912","masterAddr":"127.0.0.1:10911"},"flag":1,"language":"JAVA","opaque":155,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":156,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":157,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":158,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"extFields":{},"flag":1,"language":"JAVA","opaque":159,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":160,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"extFields":{},"flag":1,"language":"JAVA","opaque":161,"serializeTypeCurrentRPC":"JSON","version":479}',
    '{"code":0,"flag":1,"language":"JAVA","opaque":162,"serializeTypeCurrentRPC":"JSON","version":479}',
)

# feasibility §1.5: ali-ons 3.12.0 -> namesrv GET_ROUTEINFO_BY_TOPIC (keys not sorted, no serializeTypeCurrentRPC).
ALI_ONS_GET_ROUTE_FRAME = bytes.fromhex(
    "00000066000000627b22636f6465223a3130352c226c616e6775616765223a224a415641222c226f7061717565223a31"
    "2c22666c6167223a302c2276657273696f6e223a3132312c226578744669656c6473223a7b22746f706963223a22546f"
    "70696354657374227d7d"
)

# feasibility §1.5: librocketmq (C++) -> namesrv GET_ROUTEINFO_BY_TOPIC: remark "", AccessKey/OnsChannel/
# Signature extFields, and a trailing "\n" inside the header length.
CPP_GET_ROUTE_FRAME = bytes.fromhex(
    "000000c1000000bd7b22636f6465223a3130352c226578744669656c6473223a7b224163636573734b6579223a22222c"
    "224f6e734368616e6e656c223a22414c4959554e222c225369676e6174757265223a224e2f5954375836744a65355566"
    "75746d572b754e7754544a3746633d222c22746f706963223a22546f70696354657374227d2c22666c6167223a302c22"
    "6c616e6775616765223a22435050222c226f7061717565223a302c2272656d61726b223a22222c2276657273696f6e22"
    "3a36337d0a"
)

# feasibility §1.5: ali-ons encoder as a broker -> namesrv REGISTER_BROKER: numbers and booleans in extFields
# and a negative bodyCrc32 (the raw CRC as a signed int32).
ALI_ONS_REGISTER_BROKER_FRAME = bytes.fromhex(
    "00000214000000fc7b22636f6465223a3130332c226c616e6775616765223a224a415641222c226f7061717565223a31"
    "2c22666c6167223a302c2276657273696f6e223a3132312c226578744669656c6473223a7b2262726f6b65724e616d65"
    "223a2262726f6b65722d61222c2262726f6b657241646472223a223132372e302e302e313a3130393131222c22636c75"
    "737465724e616d65223a2244656661756c74436c7573746572222c22686153657276657241646472223a223132372e30"
    "2e302e313a3130393132222c2262726f6b65724964223a302c22636f6d70726573736564223a66616c73652c22626f64"
    "794372633332223a2d3235343037353639337d7d7b22746f706963436f6e66696753657269616c697a65577261707065"
    "72223a7b22746f706963436f6e6669675461626c65223a7b22546f70696354657374223a7b22746f7069634e616d6522"
    "3a22546f70696354657374222c227265616451756575654e756d73223a342c22777269746551756575654e756d73223a"
    "342c227065726d223a362c22746f70696346696c74657254797065223a2253494e474c455f544147222c22746f706963"
    "537973466c6167223a302c226f72646572223a66616c73657d7d2c226461746156657273696f6e223a7b2274696d6573"
    "74616d70223a313739353331363231353531382c22636f756e746572223a317d7d2c2266696c7465725365727665724c"
    "697374223a5b5d7d"
)

# Appendix A "Stand-alone encodings": TopicRouteData with zone, orderTopicConf and a static-topic mapping.
ROUTE_DEFAULT_DIALECT = '{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false,"zoneName":"zone-é"}],"filterServerTable":{},"orderTopicConf":"broker-a:8","queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}],"topicQueueMappingByBroker":{"broker-a":{"bname":"broker-a","currIdMap":{0:0},"dirty":false,"epoch":1700000000000,"scope":"__global__","topic":"TopicTest","totalQueues":8}}}'
ROUTE_STANDARD_DIALECT = '{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false,"zoneName":"zone-\\u00E9"}],"filterServerTable":{},"orderTopicConf":"broker-a:8","queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}],"topicQueueMappingByBroker":{"broker-a":{"bname":"broker-a","currIdMap":{"0":0},"dirty":false,"epoch":1700000000000,"scope":"__global__","topic":"TopicTest","totalQueues":8}}}'

# Appendix A: RegisterBrokerBody JSON with one topic (mappingDataVersion.timestamp was "now").
REGISTER_BODY_TEMPLATE = '{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":5,"stateVersion":0,"timestamp":1700000000000},"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":<now>},"topicConfigTable":{"TopicTest":{"attributes":{},"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":8}},"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}}'

# Appendix A: the same body compressed by RegisterBrokerBody.encode(true) (zlib, BEST_COMPRESSION).
COMPRESSED_REGISTER_BODY = bytes.fromhex(
    "78da636060b0a8564ace2fcd2b492d52b232d5512a2e492c490d4b2d2acecccf53b232d0512ac9cc4d050ae616285919"
    "9a1b20402d0303032310cb86e41764268700d5285800a19942b0a79fbb8f6b7c88a3bb4235481153742c9064000054c7"
    "1b6d"
)

# Appendix A: what it inflates to (DataVersion JSON, 1 topic "TopicTest 8 8 6 SINGLE_TAG {}", "[]", 0 mappings).
COMPRESSED_REGISTER_BODY_INFLATED = bytes.fromhex(
    "000000387b22636f756e746572223a352c22737461746556657273696f6e223a302c2274696d657374616d70223a3137"
    "30303030303030303030307d000000010000001d546f706963546573742038203820362053494e474c455f544147207b"
    "7d000000025b5d00000000"
)

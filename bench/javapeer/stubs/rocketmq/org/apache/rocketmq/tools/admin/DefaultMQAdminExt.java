package org.apache.rocketmq.tools.admin;
/** Compile-time stand-in (rocketmq-tools); not shipped. */
public class DefaultMQAdminExt {
    public void setInstanceName(String s) { }
    public void setUnitName(String s) { }
    public void start() throws org.apache.rocketmq.client.exception.MQClientException { }
    public org.apache.rocketmq.common.protocol.route.TopicRouteData examineTopicRouteInfo(String topic)
        throws org.apache.rocketmq.remoting.exception.RemotingException, org.apache.rocketmq.client.exception.MQClientException, InterruptedException { return null; }
}

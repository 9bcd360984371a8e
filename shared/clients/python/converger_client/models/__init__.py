""" Contains all the data models used in inputs/outputs """

from .activity_view import ActivityView
from .actor_view import ActorView
from .attempt_view import AttemptView
from .audit_view import AuditView
from .audit_view_changes import AuditViewChanges
from .aws_identity_view import AwsIdentityView
from .aws_identity_view_send_actions import AwsIdentityViewSendActions
from .batch_result_type_0 import BatchResultType0
from .batch_result_type_1 import BatchResultType1
from .batch_results import BatchResults
from .bulk_cost import BulkCost
from .bulk_retried import BulkRetried
from .bulk_retry import BulkRetry
from .channel_health import ChannelHealth
from .channel_view import ChannelView
from .channel_view_config import ChannelViewConfig
from .channel_view_filter_type_0 import ChannelViewFilterType0
from .channel_view_middleware_item import ChannelViewMiddlewareItem
from .channel_view_ordering_type_0 import ChannelViewOrderingType0
from .channel_view_retry_policy import ChannelViewRetryPolicy
from .created_channel import CreatedChannel
from .created_tenant import CreatedTenant
from .delivery_ref import DeliveryRef
from .delivery_state import DeliveryState
from .delivery_view import DeliveryView
from .error_body import ErrorBody
from .error_code import ErrorCode
from .error_detail import ErrorDetail
from .event_type_view import EventTypeView
from .event_type_view_schema_type_0 import EventTypeViewSchemaType0
from .health_check import HealthCheck
from .ingested import Ingested
from .item_error import ItemError
from .lane_released import LaneReleased
from .lane_view import LaneView
from .new_activity import NewActivity
from .new_activity_batch import NewActivityBatch
from .new_channel import NewChannel
from .new_channel_auto_disable import NewChannelAutoDisable
from .new_channel_circuit_breaker import NewChannelCircuitBreaker
from .new_channel_config import NewChannelConfig
from .new_channel_filter_type_0 import NewChannelFilterType0
from .new_channel_middleware_type_0_item import NewChannelMiddlewareType0Item
from .new_channel_ordering_type_0 import NewChannelOrderingType0
from .new_channel_retry_policy import NewChannelRetryPolicy
from .new_event_type import NewEventType
from .new_event_type_schema_type_0 import NewEventTypeSchemaType0
from .new_stream_token import NewStreamToken
from .new_tenant import NewTenant
from .new_user import NewUser
from .page_activity_view import PageActivityView
from .page_activity_view_data_item import PageActivityViewDataItem
from .page_attempt_view import PageAttemptView
from .page_attempt_view_data_item import PageAttemptViewDataItem
from .page_audit_view import PageAuditView
from .page_audit_view_data_item import PageAuditViewDataItem
from .page_audit_view_data_item_changes import PageAuditViewDataItemChanges
from .page_channel_view import PageChannelView
from .page_channel_view_data_item import PageChannelViewDataItem
from .page_channel_view_data_item_config import PageChannelViewDataItemConfig
from .page_channel_view_data_item_filter_type_0 import PageChannelViewDataItemFilterType0
from .page_channel_view_data_item_middleware_item import PageChannelViewDataItemMiddlewareItem
from .page_channel_view_data_item_ordering_type_0 import PageChannelViewDataItemOrderingType0
from .page_channel_view_data_item_retry_policy import PageChannelViewDataItemRetryPolicy
from .page_delivery_view import PageDeliveryView
from .page_delivery_view_data_item import PageDeliveryViewDataItem
from .page_event_type_view import PageEventTypeView
from .page_event_type_view_data_item import PageEventTypeViewDataItem
from .page_event_type_view_data_item_schema_type_0 import PageEventTypeViewDataItemSchemaType0
from .patch_channel import PatchChannel
from .patch_channel_auto_disable_type_0 import PatchChannelAutoDisableType0
from .patch_channel_circuit_breaker_type_0 import PatchChannelCircuitBreakerType0
from .patch_channel_config_type_0 import PatchChannelConfigType0
from .patch_channel_filter_type_0 import PatchChannelFilterType0
from .patch_channel_middleware_type_0_item import PatchChannelMiddlewareType0Item
from .patch_channel_retry_policy_type_0 import PatchChannelRetryPolicyType0
from .patch_event_type import PatchEventType
from .patch_event_type_schema_type_0 import PatchEventTypeSchemaType0
from .patch_tenant import PatchTenant
from .patched_tenant import PatchedTenant
from .receipts_applied import ReceiptsApplied
from .receive_receipts_body import ReceiveReceiptsBody
from .release_lane import ReleaseLane
from .replay_job_view import ReplayJobView
from .retiring_secret_view import RetiringSecretView
from .rotate import Rotate
from .secrets_view import SecretsView
from .serve_response_200 import ServeResponse200
from .shard_grant_view import ShardGrantView
from .status import Status
from .stream_token_view import StreamTokenView
from .tenant_view import TenantView
from .unknown_detail import UnknownDetail
from .unknown_messages import UnknownMessages
from .upload_view import UploadView
from .upload_view_headers import UploadViewHeaders
from .usage_day_view import UsageDayView
from .usage_view import UsageView
from .usage_view_estimated_cost_by_service_usd import UsageViewEstimatedCostByServiceUsd
from .usage_view_prices_per_million_usd import UsageViewPricesPerMillionUsd
from .user_view import UserView

__all__ = (
    "ActivityView",
    "ActorView",
    "AttemptView",
    "AuditView",
    "AuditViewChanges",
    "AwsIdentityView",
    "AwsIdentityViewSendActions",
    "BatchResults",
    "BatchResultType0",
    "BatchResultType1",
    "BulkCost",
    "BulkRetried",
    "BulkRetry",
    "ChannelHealth",
    "ChannelView",
    "ChannelViewConfig",
    "ChannelViewFilterType0",
    "ChannelViewMiddlewareItem",
    "ChannelViewOrderingType0",
    "ChannelViewRetryPolicy",
    "CreatedChannel",
    "CreatedTenant",
    "DeliveryRef",
    "DeliveryState",
    "DeliveryView",
    "ErrorBody",
    "ErrorCode",
    "ErrorDetail",
    "EventTypeView",
    "EventTypeViewSchemaType0",
    "HealthCheck",
    "Ingested",
    "ItemError",
    "LaneReleased",
    "LaneView",
    "NewActivity",
    "NewActivityBatch",
    "NewChannel",
    "NewChannelAutoDisable",
    "NewChannelCircuitBreaker",
    "NewChannelConfig",
    "NewChannelFilterType0",
    "NewChannelMiddlewareType0Item",
    "NewChannelOrderingType0",
    "NewChannelRetryPolicy",
    "NewEventType",
    "NewEventTypeSchemaType0",
    "NewStreamToken",
    "NewTenant",
    "NewUser",
    "PageActivityView",
    "PageActivityViewDataItem",
    "PageAttemptView",
    "PageAttemptViewDataItem",
    "PageAuditView",
    "PageAuditViewDataItem",
    "PageAuditViewDataItemChanges",
    "PageChannelView",
    "PageChannelViewDataItem",
    "PageChannelViewDataItemConfig",
    "PageChannelViewDataItemFilterType0",
    "PageChannelViewDataItemMiddlewareItem",
    "PageChannelViewDataItemOrderingType0",
    "PageChannelViewDataItemRetryPolicy",
    "PageDeliveryView",
    "PageDeliveryViewDataItem",
    "PageEventTypeView",
    "PageEventTypeViewDataItem",
    "PageEventTypeViewDataItemSchemaType0",
    "PatchChannel",
    "PatchChannelAutoDisableType0",
    "PatchChannelCircuitBreakerType0",
    "PatchChannelConfigType0",
    "PatchChannelFilterType0",
    "PatchChannelMiddlewareType0Item",
    "PatchChannelRetryPolicyType0",
    "PatchedTenant",
    "PatchEventType",
    "PatchEventTypeSchemaType0",
    "PatchTenant",
    "ReceiptsApplied",
    "ReceiveReceiptsBody",
    "ReleaseLane",
    "ReplayJobView",
    "RetiringSecretView",
    "Rotate",
    "SecretsView",
    "ServeResponse200",
    "ShardGrantView",
    "Status",
    "StreamTokenView",
    "TenantView",
    "UnknownDetail",
    "UnknownMessages",
    "UploadView",
    "UploadViewHeaders",
    "UsageDayView",
    "UsageView",
    "UsageViewEstimatedCostByServiceUsd",
    "UsageViewPricesPerMillionUsd",
    "UserView",
)

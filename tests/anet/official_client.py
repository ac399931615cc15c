"""Authorize.Net's official Python SDK (authorizenet on PyPI, unmodified)
against Ferrogate's emulator, with the short login and transaction key
its schema allows. A sale, its details, and a decline. Prints one JSON
line of what it saw. Environment: ENDPOINT, LOGIN, KEY."""
import json
import os
from decimal import Decimal

from authorizenet import apicontractsv1
from authorizenet.apicontrollers import createTransactionController, getTransactionDetailsController

ENDPOINT = os.environ["ENDPOINT"]


def auth():
    a = apicontractsv1.merchantAuthenticationType()
    a.name = os.environ["LOGIN"]
    a.transactionKey = os.environ["KEY"]
    return a


def sale(amount, ref):
    card = apicontractsv1.creditCardType()
    card.cardNumber = "4111111111111111"
    card.expirationDate = "2035-12"
    card.cardCode = "999"
    payment = apicontractsv1.paymentType()
    payment.creditCard = card
    tr = apicontractsv1.transactionRequestType()
    tr.transactionType = "authCaptureTransaction"
    tr.amount = Decimal(amount)
    tr.payment = payment
    req = apicontractsv1.createTransactionRequest()
    req.merchantAuthentication = auth()
    req.refId = ref
    req.transactionRequest = tr
    ctrl = createTransactionController(req)
    ctrl.setenvironment(ENDPOINT)
    ctrl.execute()
    return ctrl.getresponse()


def details(trans_id):
    req = apicontractsv1.getTransactionDetailsRequest()
    req.merchantAuthentication = auth()
    req.transId = trans_id
    ctrl = getTransactionDetailsController(req)
    ctrl.setenvironment(ENDPOINT)
    ctrl.execute()
    return ctrl.getresponse()


approved = sale("7.77", "py-1")
assert approved.messages.resultCode == "Ok", approved.messages.message[0].text
tr = approved.transactionResponse
assert str(tr.responseCode) == "1", tr.responseCode
trans_id = str(tr.transId)
seen = details(trans_id)
assert seen.messages.resultCode == "Ok"
declined = sale("5.00", "py-2")
print(json.dumps({
    "trans_id": trans_id,
    "account": str(tr.accountNumber),
    "auth_code": str(tr.authCode),
    "details_amount": str(seen.transaction.settleAmount),
    "declined_code": str(declined.transactionResponse.responseCode),
}))

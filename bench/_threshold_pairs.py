"""Pairs of a new fact and a stored memory, in English and Chinese, written for
bench/memory_thresholds.py: what reconciliation after a turn must tell apart.

- ``duplicate``: the same fact in other words (restate it, do not store it twice);
- ``new value``: a new value of a single-valued fact of the user (replace the memory);
- ``same shape``: another fact of the same form, both true ("My wife is called Anna" /
  "My sister is called Anna"): keep both;
- ``related``: on a nearby subject, neither a rewording nor a new value: keep both.
"""

from __future__ import annotations

from typing import Literal

Group = Literal["duplicate", "new value", "same shape", "related"]
GROUPS: tuple[Group, ...] = ("duplicate", "new value", "same shape", "related")

PAIRS: dict[str, dict[Group, tuple[tuple[str, str], ...]]] = {
    "en": {
        "duplicate": (
            ("I am a vegetarian", "I am vegetarian"),
            ("I don't eat meat", "I am vegetarian"),
            ("I'm allergic to peanuts", "I have a peanut allergy"),
            ("I live in Lisbon", "I live in Lisbon, Portugal"),
            ("My daughter is called Lily", "My daughter's name is Lily"),
            ("I drink my coffee black", "I take my coffee black"),
            ("I work as a nurse", "I am a nurse"),
            ("I go swimming on Tuesdays", "Every Tuesday I go swimming"),
            ("I have a dog called Biscuit", "My dog's name is Biscuit"),
            ("I prefer window seats on planes", "On flights I like a window seat"),
        ),
        "new value": (
            ("I moved to Porto", "I live in Lisbon"),
            ("I live in Berlin now", "I live in Paris"),
            ("I relocated to Berlin", "I live in Paris"),
            ("I now work as a teacher", "I work as a nurse"),
            ("I am a teacher now", "I work as a nurse"),
            ("I work at Google now", "I work at Microsoft"),
            ("I am 31 years old", "I am 30 years old"),
            ("I changed my name to Sam", "My name is Alex"),
            ("I just started working at a bakery", "I work at a bank"),
            ("I live in a village near Leeds now", "I live in London"),
        ),
        "same shape": (
            ("I have three kids", "I have two kids"),
            ("My wife is called Anna", "My sister is called Anna"),
            ("I like tea", "I like coffee"),
            ("I play the piano", "I play the guitar"),
            ("My brother lives in Rome", "My sister lives in Rome"),
            ("I visited Paris in May", "I visited Rome in May"),
            ("I am learning Spanish", "I am learning Japanese"),
            ("My son is six", "My daughter is six"),
            ("I have a cat", "I have a dog"),
            ("I go running on Mondays", "I go swimming on Mondays"),
        ),
        "related": (
            ("My cat is named Robert", "My name is Robert"),
            ("My sister lives in Porto", "I live in Lisbon"),
            ("I visited Porto last year", "I live in Lisbon"),
            ("My husband is a nurse", "I work as a nurse"),
            ("I want to learn to cook", "I work as a chef"),
            ("I love Italian food", "I live in Italy"),
            ("I was born in 1990", "I am 30 years old"),
            ("My office is near the river", "I work at a bank"),
            ("I am saving for a house", "I live in London"),
            ("I take the train to work", "I work at Microsoft"),
        ),
    },
    "zh": {
        "duplicate": (
            ("我住在上海", "我的家在上海"),
            ("我吃素", "我是素食者"),
            ("我对花生过敏", "我花生过敏"),
            ("我是一名护士", "我的工作是护士"),
            ("我女儿叫莉莉", "我女儿的名字是莉莉"),
            ("我喝咖啡不加糖", "我的咖啡不放糖"),
            ("我每周二去游泳", "每个星期二我都去游泳"),
            ("我养了一只叫豆豆的狗", "我的狗叫豆豆"),
            ("我坐飞机喜欢靠窗", "乘飞机时我爱坐靠窗的位置"),
            ("我不能吃辣", "我吃不了辣的"),
        ),
        "new value": (
            ("我搬到了杭州", "我住在上海"),
            ("我现在住在北京", "我住在上海"),
            ("我换了工作，现在是老师", "我是一名护士"),
            ("我现在当老师了", "我是一名护士"),
            ("我现在在腾讯上班", "我在阿里巴巴工作"),
            ("我今年31岁了", "我今年30岁"),
            ("我改名叫小李", "我叫小王"),
            ("我刚去了一家面包店工作", "我在银行工作"),
            ("我搬去了深圳", "我住在广州"),
            ("我已经不在银行了，现在在学校教书", "我在银行工作"),
        ),
        "same shape": (
            ("我有三个孩子", "我有两个孩子"),
            ("我妻子叫安娜", "我姐姐叫安娜"),
            ("我喜欢喝茶", "我喜欢喝咖啡"),
            ("我会弹钢琴", "我会弹吉他"),
            ("我哥哥住在成都", "我姐姐住在成都"),
            ("我五月去了巴黎", "我五月去了罗马"),
            ("我在学西班牙语", "我在学日语"),
            ("我儿子六岁", "我女儿六岁"),
            ("我养了一只猫", "我养了一只狗"),
            ("我每周一跑步", "我每周一游泳"),
        ),
        "related": (
            ("我的猫叫小王", "我叫小王"),
            ("我姐姐住在杭州", "我住在上海"),
            ("我去年去过杭州", "我住在上海"),
            ("我丈夫是护士", "我是一名护士"),
            ("我想学做饭", "我是一名厨师"),
            ("我喜欢吃意大利菜", "我住在意大利"),
            ("我是1990年出生的", "我今年30岁"),
            ("我的办公室在江边", "我在银行工作"),
            ("我在攒钱买房", "我住在上海"),
            ("我坐地铁上班", "我在阿里巴巴工作"),
        ),
    },
}
